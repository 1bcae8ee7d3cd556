/**
 * Who owns which loop device indexes. The kernel is shared by every test file, benchmark, the demo and the
 * fault storm (and by other jobs on the machine), so each owner adds loop devices only at its own indexes:
 * then a device one run leaves behind is found again only by its owner, which takes it back
 * (addLoopDevice). test/unit/harness/loop-owners.test.ts fails when two ranges overlap or when a file adds a
 * loop device outside its owner's ranges.
 */
export const loopOwners = {
  'test/e2e/devices.test.ts': [[200, 299]],
  'test/e2e/plugins-serve.test.ts': [[300, 399]],
  'bench/plugins.ts': [[400, 409]],
  'bench/agent.ts': [[410, 419]],
  'test/e2e/cgroup-v2-devices.test.ts': [[420, 424]],
  'test/e2e/runtime.test.ts': [[425, 429]],
  'test/e2e/uevent-overflow.test.ts': [[430, 439]],
  'test/e2e/device-workloads.test.ts': [[440, 449]],
  'test/e2e/node-harness.test.ts': [[450, 459]],
  'test/e2e/dra.test.ts': [[460, 479]],
  'test/e2e/dra-workloads.test.ts': [[480, 489]],
  'test/e2e/two-nodes.test.ts': [[490, 499]],
  'test/e2e/dra-taints.test.ts': [[510, 519]],
  /** A plugin loop, the hot-plug loop, a claim's, node B's, and up to 50 re-plugs from 550. */
  'bench/dra.ts': [[530, 599]],
  /** The fault storm's 18 numbers from its loopBase. */
  'test/e2e/agent-faults.test.ts': [[600, 619]],
  'bench/faults.ts': [[640, 659]],
  'test/e2e/dra-extended-resources.test.ts': [[670, 689]],
  'test/e2e/two-node-workloads.test.ts': [[700, 709]],
  'test/e2e/host-mounts.test.ts': [[800, 800]],
  'test/e2e/agent-host-mounts.test.ts': [[801, 804]],
  'test/e2e/plugins-host-mounts.test.ts': [[805, 809]],
  'test/e2e/devices-agent.test.ts': [
    [810, 819],
    [980, 999],
  ],
  'test/e2e/storage-members.test.ts': [[820, 829]],
  'test/e2e/physical-devices.test.ts': [[840, 849]],
  'test/e2e/dra-all-devices.test.ts': [[850, 869]],
  'test/e2e/dra-runtime-cdi.test.ts': [[870, 879]],
  'bench/devices.ts': [[900, 949]],
  /** `npm run demo`'s class; `npm run node:down` removes them. */
  'scripts/demo/device-half.ts': [[950, 959]],
  'test/e2e/loop-devices.test.ts': [[960, 969]],
} as const satisfies Record<string, ReadonlyArray<readonly [first: number, last: number]>>

export type LoopOwner = keyof typeof loopOwners

/** Every index the owner may add a loop device at, in order. */
export function loopIndexes(owner: LoopOwner): number[] {
  return loopOwners[owner].flatMap(([first, last]) => Array.from({length: last - first + 1}, (_, i) => first + i))
}

/** The first index of the owner's first range. */
export function firstLoop(owner: LoopOwner): number {
  return loopOwners[owner][0][0]
}
