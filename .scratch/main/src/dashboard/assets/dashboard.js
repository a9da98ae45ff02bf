// bgcut dashboard: copy buttons and Try it. Loaded from the dashboard itself (CSP: script-src 'self').
'use strict';

const token = document.querySelector('meta[name="csrf-token"]')?.content ?? '';
const base = document.querySelector('meta[name="dashboard-base"]')?.content ?? '';

// Copy buttons: <button data-copy="ID"> copies the value of the input with that id.
for (const button of document.querySelectorAll('button[data-copy]')) {
  button.addEventListener('click', async () => {
    const input = document.getElementById(button.dataset.copy);
    const status = document.querySelector('.copy-status');
    input.select();
    try {
      await navigator.clipboard.writeText(input.value);
      if (status) status.textContent = 'Copied.';
    } catch {
      if (status) status.textContent = 'Selected: press Ctrl+C (or Cmd+C) to copy.';
    }
  });
}

const form = document.getElementById('try-form');
if (form) {
  const file = document.getElementById('file');
  const drop = document.getElementById('drop-zone');
  const status = document.getElementById('try-status');
  const submit = document.getElementById('try-submit');
  const original = document.getElementById('original');
  const result = document.getElementById('result');
  const download = document.getElementById('download');
  const compare = document.getElementById('compare');
  let urls = [];

  drop.addEventListener('dragover', (event) => {
    event.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (event) => {
    event.preventDefault();
    drop.classList.remove('over');
    if (event.dataTransfer?.files?.length) file.files = event.dataTransfer.files;
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const picked = file.files?.[0];
    if (!picked) {
      status.textContent = 'Pick an image first.';
      return;
    }
    const body = new FormData();
    body.append('format', document.getElementById('format').value);
    for (const id of ['quality', 'model']) {
      const select = document.getElementById(id);
      if (select) body.append(id, select.value);
    }
    if (document.getElementById('use-bg')?.checked) body.append('bg_color', document.getElementById('bg-color').value);
    if (document.getElementById('crop')?.checked) body.append('crop', 'true');
    body.append('file', picked, picked.name);
    submit.disabled = true;
    status.textContent = 'Removing the background...';
    const started = performance.now();
    try {
      const response = await fetch(`${base}/try`, { method: 'POST', body, headers: { 'x-csrf-token': token }, credentials: 'same-origin' });
      if (!response.ok) {
        const problem = await response.json().catch(() => ({}));
        status.textContent = `Refused (${response.status}): ${problem.detail ?? problem.title ?? response.statusText}`;
        return;
      }
      const blob = await response.blob();
      for (const url of urls) URL.revokeObjectURL(url);
      urls = [URL.createObjectURL(picked), URL.createObjectURL(blob)];
      original.src = urls[0];
      result.src = urls[1];
      download.href = urls[1];
      download.download = filenameOf(response.headers.get('content-disposition') ?? '') ?? 'cutout';
      compare.hidden = false;
      await result.decode().catch(() => {});
      status.textContent = `Done in ${((performance.now() - started) / 1000).toFixed(1)} s: ${response.headers.get('x-width')} × ${response.headers.get('x-height')}, ${Math.round(blob.size / 1024)} KiB.`;
    } catch (error) {
      status.textContent = `Failed: ${error.message}`;
    } finally {
      submit.disabled = false;
    }
  });
}

/** The file name in a Content-Disposition header: filename* (RFC 5987) first, else filename. */
function filenameOf(header) {
  const extended = /filename\*=UTF-8''([^;]+)/i.exec(header);
  if (extended) {
    try {
      return decodeURIComponent(extended[1]);
    } catch {}
  }
  return /filename="?([^";]+)"?/i.exec(header)?.[1];
}
