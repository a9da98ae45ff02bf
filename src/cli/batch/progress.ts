import cliProgress from 'cli-progress';

export interface ProgressCounts {
  done: number;
  failed: number;
  total: number;
  retries: number;
}

/**
 * One line: bar, done/total, images per second, ETA, failures and retries. Redrawn in place on
 * a terminal; on a pipe or a log, a plain line every few seconds.
 */
export class BatchProgress {
  private readonly bar: cliProgress.SingleBar;
  private readonly started = Date.now();

  constructor(stream: NodeJS.WriteStream, total: number) {
    this.bar = new cliProgress.SingleBar(
      {
        stream,
        format: ' {bar} {value}/{total} | {rate} img/s | ETA {etaText} | failed {failed} | retries {retries}',
        barCompleteChar: '\u2588',
        barIncompleteChar: '\u2591',
        barsize: 30,
        hideCursor: true,
        fps: 5,
        noTTYOutput: true,
        notTTYSchedule: 5_000,
        emptyOnZero: true,
      },
      cliProgress.Presets.shades_classic,
    );
    this.bar.start(total, 0, { rate: '0.00', etaText: '-', failed: 0, retries: 0 });
  }

  update(counts: ProgressCounts): void {
    const finished = counts.done + counts.failed;
    const seconds = (Date.now() - this.started) / 1000;
    const rate = finished / Math.max(seconds, 0.001);
    // Our own ETA from the overall rate: steadier than the bar's, with uneven image sizes.
    const etaText = finished === 0 ? '-' : formatSeconds((counts.total - finished) / rate);
    this.bar.update(finished, { rate: rate.toFixed(2), etaText, failed: counts.failed, retries: counts.retries });
  }

  stop(): void {
    this.bar.stop();
  }
}

function formatSeconds(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}
