// The integration files that cannot share the control plane with other files: each runs by itself,
// after every other file (the `integration-alone` project of vitest.config.ts). Every other
// integration file runs side by side with others, each in its own namespaces and on its own ports.
// A file belongs here only for something it shares by a fixed name or takes over for a while; the
// reason says what, so it can leave the list once that is gone.
export const RUN_ALONE: ReadonlyArray<{ file: string; why: string }> = [];

export const runAloneFiles = (): string[] => RUN_ALONE.map((f) => f.file);
