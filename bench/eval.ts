/**
 * npm run eval -- <folder> [--quality fast,balanced,best|all] [--json] [--check quality/] [--write quality/]
 *                 [--model isnet] [--limit N] [--composites DIR] [--mask-cache DIR] [--size 320,512,1024]
 *
 * Cutout quality on pairs NAME.jpg|png + NAME.mask.png (8-bit grey, same size), through the same
 * pipeline the endpoint uses (probe, segment at the quality on a real inference server, render),
 * reporting per image and as means for each quality mode: IoU (alpha >= 128), alpha MAE (0..1),
 * boundary F-measure, time per image and output bytes. `dimcrop_*` pairs (crops where the object
 * is cut by the frame) are reported apart from whole-object pairs. `--quality best` runs
 * `balanced` too, to compare image by image. `--check` (a file, for one mode, or a folder
 * holding `<model>.json` for balanced and `<model>.<mode>.json` for the others) fails (exit 1)
 * when a mode's whole-object IoU drops by more than 0.01 or MAE rises by more than 0.005 against
 * the committed figures, or (`best`, run beside balanced) one image loses more than 0.05 IoU to balanced; `--write` writes them. `--mask-cache` keeps the model's answers on disk
 * (outside the project) so a rerun costs no inference (its times then mean nothing).
 * Each cutout's confidence figure (src/core/image/confidence.ts) is reported beside its scores,
 * with its Spearman rank correlation with 1 - IoU per mode (whole-object pairs).
 * `--model default` runs each pass on the model the mode table names (what a request naming no
 * model gets); `--pass-models WHOLE[,CROP]` tries other models per pass; `--accuracy-rule quality/`
 * fails when a mode that runs a pass on another model than `isnet` loses more than 0.005 IoU or
 * gains more than 0.003 MAE against `isnet`'s committed figures for that mode.
 * `--size` (a model that takes any size) runs each asked mode with the whole image at each of
 * these sizes instead of the mode's own (rows `mode@size`): the size table. Not with --check/--write.
 */
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { DEFAULT_OUTPUT, ISNET_PROFILE } from '../src/core/index.js';
import { fullSizeAlpha, probeImage, type MaskModel } from '../src/core/image/pipeline.js';
import { planFor, QUALITIES, renderSettingsFor, segmentAtQuality, type Quality } from '../src/core/image/multi-pass.js';
import { renderOutput } from '../src/core/image/output.js';
import { PixelPool } from '../src/core/image/pixel-pool.js';
import { modelRunner } from './model-runner.js';
import { score, spearman, type Scores } from './quality-metrics.js';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    json: { type: 'boolean' },
    check: { type: 'string' },
    write: { type: 'string' },
    model: { type: 'string', default: 'isnet' },
    limit: { type: 'string' },
    composites: { type: 'string' },
    quality: { type: 'string', default: 'balanced' },
    'mask-cache': { type: 'string' },
    size: { type: 'string' },
    'pass-models': { type: 'string' },
    'accuracy-rule': { type: 'string' },
  },
});
/**
 * `--model default`: what a request that names no model gets, each pass on the model the mode
 * table names (ISNET_PROFILE.modes: `model`, `cropModel`; the rest on `isnet`), all served by one
 * inference server. `--pass-models WHOLE[,CROP]` overrides the table's models for every mode asked
 * (to try a combination). Any other `--model` runs every pass on that one model.
 */
const DEFAULT_MODEL = 'isnet';
const FLOAT_MODEL = 'isnet';
const byTable = values.model === 'default';
const override = values['pass-models']?.split(',').map((m) => m.trim());
if (override && (!byTable || override.length < 1 || override.length > 2)) {
  console.error('--pass-models WHOLE[,CROP] goes with --model default');
  process.exit(2);
}
const folder = positionals[0];
if (!folder) {
  console.error('usage: npm run eval -- <folder> [--quality fast,balanced,best|all] [--json] [--check figures.json|dir] [--write figures.json|dir]');
  process.exit(2);
}
const asked = values.quality === 'all' ? [...QUALITIES] : values.quality!.split(',').map((q) => q.trim());
for (const q of asked) {
  if (!(QUALITIES as readonly string[]).includes(q)) {
    console.error(`--quality: "${q}" is not one of ${QUALITIES.join(', ')}, all`);
    process.exit(2);
  }
}
// `best` is judged against `balanced` image by image, so it brings balanced along.
const qualities = QUALITIES.filter((q) => asked.includes(q) || (q === 'balanced' && asked.includes('best')));
const sizes = values.size ? values.size.split(',').map(Number) : [];
if (sizes.some((n) => !Number.isInteger(n) || n < 32 || n > 4096) || (sizes.length > 0 && (values.check || values.write))) {
  console.error('--size takes sizes in 32..4096, and not with --check or --write');
  process.exit(2);
}
/** What is run: each quality, or each quality at each --size (labelled `quality@size`). */
const modes: string[] = sizes.length === 0 ? [...qualities] : qualities.flatMap((q) => sizes.map((n) => `${q}@${n}`));
const qualityOf = (mode: string) => mode.split('@')[0] as Quality;
const sizeOf = (mode: string) => (mode.includes('@') ? Number(mode.split('@')[1]) : undefined);

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN);
/** The server's defaults (src/core/options.ts). */
const RENDER = { pngCompressionLevel: 4, maxOutputPixels: Infinity, foregroundEstimation: true };

type Row = { name: string; group: 'whole' | 'dimcrop'; quality: string; ms: number; inferenceMs: number; passes: number; bytes: number; confidence: number } & Scores;

/** Where the figures of a mode live: the file itself, or in a folder `<model>.json` (balanced) / `<model>.<mode>.json`. */
async function figuresFile(target: string, quality: string): Promise<string> {
  const isDir = await stat(target).then((s) => s.isDirectory(), () => target.endsWith('/'));
  if (!isDir) {
    if (modes.length > 1) throw new Error('--check/--write with several modes needs a folder');
    return target;
  }
  return path.join(target, quality === 'balanced' ? `${values.model}.json` : `${values.model}.${quality}.json`);
}

async function main(): Promise<number> {
  const all = await readdir(folder!);
  const names = all.filter((f) => /\.mask\.png$/.test(f)).sort().map((f) => f.replace(/\.mask\.png$/, '')).slice(0, values.limit ? Number(values.limit) : undefined);
  const profile = ISNET_PROFILE;
  /** The model each kind of pass of a mode runs on. */
  const passModelNames = (quality: Quality): { whole: string; crop: string } => {
    if (!byTable) return { whole: values.model!, crop: values.model! };
    const plan = profile.modes?.[quality];
    const whole = override?.[0] ?? plan?.model ?? DEFAULT_MODEL;
    return { whole, crop: override?.[1] ?? override?.[0] ?? plan?.cropModel ?? whole };
  };
  const used = byTable ? [DEFAULT_MODEL, ...qualities.flatMap((q) => Object.values(passModelNames(q)))] : [values.model!];
  const runner = modelRunner(used, values['mask-cache']);
  const freeSize = await runner.freeSize();
  if (values.composites) await mkdir(values.composites, { recursive: true });

  const rows: Row[] = [];
  const pixelPool = new PixelPool();
  try {
    for (const name of names) {
      const imageFile = all.find((f) => f.startsWith(`${name}.`) && !f.endsWith('.mask.png') && /\.(jpe?g|png)$/i.test(f));
      if (!imageFile) continue;
      const bytes = await readFile(path.join(folder!, imageFile));
      const truth = await sharp(path.join(folder!, `${name}.mask.png`)).extractChannel(0).raw().toBuffer({ resolveWithObject: true });
      // Modes side by side, image by image, so a busy machine slows them alike.
      for (const mode of modes) {
        const quality = qualityOf(mode);
        let passes = 0;
        const counting = (model: MaskModel): MaskModel => (input, signal, size) => {
          passes++;
          return model(input, signal, size);
        };
        const names = passModelNames(quality);
        const models = { whole: counting(runner.modelNamed(names.whole)), crop: counting(runner.modelNamed(names.crop)) };
        const own = planFor(profile, quality, freeSize);
        const size = sizeOf(mode);
        const plan = size === undefined ? own : { ...own, size };
        const started = performance.now();
        const probe = await probeImage(bytes, { maxInputPixels: 100_000_000 });
        const seg = await segmentAtQuality(quality, bytes, probe, profile, models, { maxInputPixels: 100_000_000 }, new AbortController().signal, pixelPool, true, plan);
        const rendered = await renderOutput(seg, DEFAULT_OUTPUT, renderSettingsFor(quality, RENDER), pixelPool);
        const ms = performance.now() - started;
        if (truth.info.width !== seg.width || truth.info.height !== seg.height) throw new Error(`${name}: mask size differs from the image`);
        const scores = score(await fullSizeAlpha(seg, pixelPool), truth.data, seg.width, seg.height);
        rows.push({ name, group: name.startsWith('dimcrop_') ? 'dimcrop' : 'whole', quality: mode, ms, inferenceMs: seg.timings.inference ?? 0, passes, bytes: rendered.body.length, confidence: seg.confidence, ...scores });
        if (values.composites) {
          // The cutout over a red background, to look at edges and colour spill.
          await sharp(rendered.body).flatten({ background: '#d01818' }).jpeg().toFile(path.join(values.composites, `${name}.${mode}.jpg`));
        }
      }
      if (!values.json) process.stderr.write('.');
    }
  } finally {
    await pixelPool.close();
    await runner.close();
  }

  const summarise = (quality: string, group: 'whole' | 'dimcrop') => {
    const g = rows.filter((r) => r.group === group && r.quality === quality);
    const summary: Record<string, number | string> = {
      count: g.length,
      iou: round(mean(g.map((r) => r.iou))),
      mae: round(mean(g.map((r) => r.mae))),
      boundaryF: round(mean(g.map((r) => r.boundaryF))),
      msPerImage: Math.round(mean(g.map((r) => r.ms))),
      // session.run (the inference server's own figure), median over the images.
      inferenceMsMedian: Math.round(median(g.map((r) => r.inferenceMs))),
      passesPerImage: round(mean(g.map((r) => r.passes))),
      outputBytes: Math.round(mean(g.map((r) => r.bytes))),
      // Does the confidence figure rank the images by their error? (1 = exactly)
      confidenceSpearman: round(spearman(g.map((r) => 1 - r.confidence), g.map((r) => 1 - r.iou))),
    };
    // Against balanced at the same --size when sizes are asked, else against balanced.
    const baseline = sizeOf(quality) === undefined ? 'balanced' : `balanced@${sizeOf(quality)}`;
    if (quality !== baseline && modes.includes(baseline) && group === 'whole') {
      // The largest IoU loss of one image against balanced (the target: at most 0.05).
      const base = new Map(rows.filter((r) => r.quality === baseline).map((r) => [r.name, r.iou]));
      const worst = g.map((r) => ({ name: r.name, drop: base.get(r.name)! - r.iou })).sort((a, b) => b.drop - a.drop)[0];
      if (worst) Object.assign(summary, { worstIouDrop: round(worst.drop), worstImage: worst.name });
    }
    return summary;
  };
  const report = {
    model: values.model,
    passModels: Object.fromEntries(qualities.map((q) => [q, passModelNames(q)])),
    modes: Object.fromEntries(modes.map((q) => [q, { wholeObject: summarise(q, 'whole'), dimcrop: summarise(q, 'dimcrop') }])),
    images: rows.map((r) => ({ ...r, iou: round(r.iou), mae: round(r.mae), boundaryF: round(r.boundaryF), ms: Math.round(r.ms), inferenceMs: Math.round(r.inferenceMs), confidence: round(r.confidence) })),
  };

  if (values.json) console.log(JSON.stringify(report, null, 2));
  else {
    console.log(`\n| image | quality | IoU | alpha MAE | boundary F | confidence | passes | ms | session.run ms |\n|---|---|---|---|---|---|---|---|---|`);
    for (const r of report.images) console.log(`| ${r.name} | ${r.quality} | ${r.iou.toFixed(3)} | ${r.mae.toFixed(4)} | ${r.boundaryF.toFixed(3)} | ${r.confidence.toFixed(2)} | ${r.passes} | ${r.ms} | ${r.inferenceMs} |`);
    console.log(`\n| pairs | quality | IoU | alpha MAE | boundary F | passes | ms per image | session.run ms (median) | output bytes | worst IoU drop vs balanced | confidence vs 1-IoU (Spearman) |\n|---|---|---|---|---|---|---|---|---|---|---|`);
    for (const [group, label] of [['wholeObject', 'whole object'], ['dimcrop', 'dimcrop']] as const) {
      for (const q of modes) {
        const s = report.modes[q]![group];
        const worst = s.worstIouDrop === undefined ? '' : `${Number(s.worstIouDrop).toFixed(3)} (${s.worstImage})`;
        console.log(`| ${label} (${s.count}) | ${q} | ${Number(s.iou).toFixed(3)} | ${Number(s.mae).toFixed(4)} | ${Number(s.boundaryF).toFixed(3)} | ${s.passesPerImage} | ${s.msPerImage} | ${s.inferenceMsMedian} | ${s.outputBytes} | ${worst} | ${Number(s.confidenceSpearman).toFixed(3)} |`);
      }
    }
  }
  let failed = false;
  for (const q of modes) {
    // Committed figures are aggregates only: no image names from the evaluation set.
    const { worstImage: _name, ...whole } = report.modes[q]!.wholeObject;
    const figures = { model: values.model, quality: q, ...(byTable ? { passModels: passModelNames(qualityOf(q)) } : {}), wholeObject: whole, dimcrop: report.modes[q]!.dimcrop };
    if (values.write) await writeFile(await figuresFile(values.write, q), `${JSON.stringify(figures, null, 2)}\n`);
    if (values.check) {
      const file = await figuresFile(values.check, q);
      const committed = JSON.parse(await readFile(file, 'utf8')) as { wholeObject: Scores };
      const now = report.modes[q]!.wholeObject as unknown as Scores;
      const iouDrop = committed.wholeObject.iou - now.iou;
      const maeRise = now.mae - committed.wholeObject.mae;
      // `best` also fails when one image loses more than 0.05 IoU to balanced (it must never be
      // the worse choice); `fast` runs at a smaller size and trades detail for time by design.
      const worst = q === 'best' ? ((report.modes[q]!.wholeObject.worstIouDrop as number | undefined) ?? 0) : 0;
      const ok = iouDrop <= 0.01 && maeRise <= 0.005 && worst <= 0.05;
      const reported = (report.modes[q]!.wholeObject.worstIouDrop as number | undefined) ?? 0;
      console.log(`quality check (${q}) against ${file}: IoU ${now.iou} (committed ${committed.wholeObject.iou}), MAE ${now.mae} (committed ${committed.wholeObject.mae}), worst single-image IoU drop vs balanced ${reported}${q === 'best' ? '' : ' (not checked)'}: ${ok ? 'ok' : 'REGRESSION'}`);
      if (!ok) failed = true;
    }
    // The accuracy rule for every mode that runs a pass on another model than the float one:
    // whole-object IoU at most 0.005 below, MAE at most 0.003 above the float model's committed figures.
    const names = passModelNames(qualityOf(q));
    if (values['accuracy-rule'] && (names.whole !== FLOAT_MODEL || names.crop !== FLOAT_MODEL)) {
      const target = values['accuracy-rule'];
      const file = path.join(target, q === 'balanced' ? `${FLOAT_MODEL}.json` : `${FLOAT_MODEL}.${q}.json`);
      const float = JSON.parse(await readFile(file, 'utf8')) as { wholeObject: Scores };
      const now = report.modes[q]!.wholeObject as unknown as Scores;
      const dIou = now.iou - float.wholeObject.iou;
      const dMae = now.mae - float.wholeObject.mae;
      const ok = dIou >= -0.005 - 1e-9 && dMae <= 0.003 + 1e-9;
      console.log(`accuracy rule (${q}: whole ${names.whole}, crops ${names.crop}) against ${file}: ΔIoU ${dIou.toFixed(4)} (>= -0.005), ΔMAE ${dMae.toFixed(4)} (<= +0.003): ${ok ? 'ok' : 'BROKEN'}`);
      if (!ok) failed = true;
    }
  }
  return failed ? 1 : 0;
}

function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function round(x: number): number {
  return Math.round(x * 10000) / 10000;
}

process.exitCode = await main();
