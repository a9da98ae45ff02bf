// The multipart reader alone: the longest turn of the event loop while readUpload reads an upload over
// loopback (issue 26). node bench/multipart-block.mjs <a build's dist folder> <file> <requests>; the client runs in a child process.
import http from 'node:http';
import { fork } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [role, a, b, c] = process.argv.slice(2);
const BOUNDARY = '----reader-block-0123456789';
if (role === 'client') {
  const port = Number(a), file = readFileSync(b), n = Number(c);
  const body = Buffer.concat([Buffer.from(`--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="x.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`), file, Buffer.from(`\r\n--${BOUNDARY}--\r\n`)]);
  for (let i = 0; i < n; i++) {
    await new Promise((resolve, reject) => {
      const req = http.request({ port, method: 'POST', headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}`, 'content-length': body.length } }, (res) => { res.resume(); res.on('end', resolve); });
      req.on('error', reject); req.end(body);
    });
  }
  process.exit(0);
}
const [dist, path, n] = [role, a, b];
const { readUpload } = await import(pathToFileURL(`${dist}/src/core/multipart.js`).href);
const blocks = [];
const server = http.createServer(async (req, res) => {
  // A setImmediate ticker: the gap between two ticks is one turn of the event loop; CPU time
  // (process.cpuUsage, this process is otherwise idle) is robust to a loaded box's preemption.
  let ticking = true, lastWall = performance.now(), lastCpu = process.cpuUsage(), maxWall = 0, maxCpu = 0;
  const measure = () => {
    const wall = performance.now(), cpu = process.cpuUsage();
    maxWall = Math.max(maxWall, wall - lastWall);
    maxCpu = Math.max(maxCpu, (cpu.user + cpu.system - lastCpu.user - lastCpu.system) / 1000);
    lastWall = wall; lastCpu = cpu;
  };
  const tick = () => { measure(); if (ticking) setImmediate(tick); };
  setImmediate(tick);
  const t = performance.now();
  const up = await readUpload(req, req.headers, { maxFileBytes: 64e6, maxFields: 4, maxFieldBytes: 100 }, new AbortController().signal);
  ticking = false;
  measure(); // the turn that resolved the read (all of it, when the whole body came in one turn)
  blocks.push({ max: maxCpu, wall: maxWall, ms: performance.now() - t, bytes: up.file.length });
  res.end('ok');
});
server.listen(0, '127.0.0.1', () => {
  const child = fork(new URL(import.meta.url).pathname, ['client', server.address().port, path, n]);
  child.on('exit', () => {
    const median = (k) => { const v = blocks.map((b) => b[k]).sort((x, y) => x - y); return `${v[Math.floor(v.length / 2)].toFixed(1)} (worst ${v.at(-1).toFixed(1)})`; };
    console.log(`${dist} ${path.split('/').pop()} ×${blocks.length} ${blocks[0].bytes} B: longest turn CPU ms ${median('max')}, wall ms ${median('wall')}; read ms ${median('ms')}`);
    server.close();
  });
});
