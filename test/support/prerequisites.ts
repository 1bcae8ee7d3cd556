/**
 * A test that needs something this machine may lack (the control plane build, root, containerd) calls this
 * when it is missing: under CI=true it fails, elsewhere it skips with the reason visible in the report.
 */
export function missingPrerequisite(context: Mocha.Context, reason: string): never {
  if (process.env.CI === 'true') throw new Error(`prerequisite missing under CI=true: ${reason}`)
  context.skip()
  throw new Error(`skipped: ${reason}`)
}
