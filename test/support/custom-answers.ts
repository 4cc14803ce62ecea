// A CustomApi for unit tests that answers each GET by plural from a table (an Error with a `code`
// stands for an HTTP error), and records what was read: which objects a check reads, and in what order.
export function customAnswers(answers: Record<string, unknown>) {
  const reads: string[] = [];
  return {
    reads,
    getNamespacedCustomObject: async (a: { plural: string; namespace: string; name: string }) => {
      reads.push(`${a.plural}/${a.namespace}/${a.name}`);
      const v = answers[a.plural];
      if (v instanceof Error) throw v;
      return v as object;
    },
    patchNamespacedCustomObject: async () => ({}),
  };
}

/** An API answer of 403. */
export const forbidden = () => Object.assign(new Error('forbidden'), { code: 403 });
