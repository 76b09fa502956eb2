/**
 * The one way cronledger waits for something with a limit: `promise`, or
 * `ms` milliseconds, whichever comes first (or `cut`, when given, which ends
 * the wait early as if the time were up). The timer is cleared either way,
 * so nothing keeps the process alive after the wait. A promise that loses
 * the race is left to settle on its own: its rejection is handled here, so
 * it never becomes an unhandled one.
 */
export async function withinDeadline<T>(promise: Promise<T>, ms: number, cut?: Promise<unknown>): Promise<{ readonly done: true; readonly value: T } | { readonly done: false }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<{ done: false }>((resolve) => {
    timer = setTimeout(() => resolve({ done: false }), Math.max(0, ms));
    void cut?.then(() => resolve({ done: false }));
  });
  const settled = promise.then((value) => ({ done: true as const, value }));
  settled.catch(() => undefined);
  try {
    return await Promise.race([settled, late]);
  } finally {
    clearTimeout(timer);
  }
}
