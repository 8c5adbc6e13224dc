/**
 * Hybrid logical clocks (`docs/protocol.md#hybrid-logical-clock`): `<physical>-<counter>-<node>`,
 * 13 decimal digits of milliseconds, 4 lowercase hex digits of counter, the writer's id. The
 * text's byte order is the clock's order.
 */

/** One clock reading. */
export interface HlcReading {
  physicalMs: number;
  counter: number;
  node: string;
}

const MAX_PHYSICAL_MS = 9_999_999_999_999;
const MAX_COUNTER = 0xffff;
const FORM = /^([0-9]{13})-([0-9a-f]{4})-([A-Za-z0-9_-]{1,64})$/;

/** The text of a reading. */
export function formatHlc(reading: HlcReading): string {
  const physical = String(reading.physicalMs).padStart(13, "0");
  const counter = reading.counter.toString(16).padStart(4, "0");
  return `${physical}-${counter}-${reading.node}`;
}

/** The reading `text` holds, or `undefined` when it is not one. */
export function parseHlc(text: string): HlcReading | undefined {
  const match = FORM.exec(text);
  if (!match) return undefined;
  return { physicalMs: Number(match[1]), counter: parseInt(match[2]!, 16), node: match[3]! };
}

/** A node's clock: readings never go backwards and stay ahead of every reading observed. */
export class HlcClock {
  private lastMs = 0;
  private counter = 0;

  constructor(
    readonly node: string,
    private readonly wallClock: () => number = Date.now,
  ) {
    if (!/^[A-Za-z0-9_-]{1,64}$/.test(node)) {
      throw new TypeError("an HLC node id is 1 to 64 ASCII letters, digits, `-` or `_`");
    }
  }

  /** The next reading. */
  now(): string {
    const wall = Math.floor(this.wallClock());
    if (wall > this.lastMs) {
      this.lastMs = wall;
      this.counter = 0;
    } else if (this.counter === MAX_COUNTER) {
      this.lastMs += 1;
      this.counter = 0;
    } else {
      this.counter += 1;
    }
    return formatHlc({ physicalMs: Math.min(this.lastMs, MAX_PHYSICAL_MS), counter: this.counter, node: this.node });
  }

  /** The last reading taken, or the last observed when that is further (this node's). */
  get last(): string {
    return formatHlc({ physicalMs: Math.min(this.lastMs, MAX_PHYSICAL_MS), counter: this.counter, node: this.node });
  }

  /** Take a reading of another node (or one of this node's before a restart) into account. */
  observe(text: string): void {
    const remote = parseHlc(text);
    if (!remote) return;
    if (remote.physicalMs > this.lastMs) {
      this.lastMs = remote.physicalMs;
      this.counter = remote.counter;
    } else if (remote.physicalMs === this.lastMs && remote.counter > this.counter) {
      this.counter = remote.counter;
    }
  }
}
