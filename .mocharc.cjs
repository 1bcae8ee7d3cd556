// The test suite in three parts: `npm test` runs them all; `npm run test:unit` (seconds, no root, no Go),
// `test:integration` (a real kube-apiserver) and `test:e2e` (root: the real kernel and node) run one each,
// chosen by NFDCTL_TEST_PART. A spec on mocha's command line is added to this list, never put in its place.
// The part `versions` is the suites whose outcome depends on the Kubernetes release (test/run.ts runs them on
// each release of harness/controlplane/kube-versions): what the shipped files need of the API server, DRA and
// its gates, the device plugin API, and doctor, which reads them.
const {accessSync, constants, statSync} = require('node:fs')

const parts = {
  unit: 'test/unit/**/*.test.ts',
  integration: 'test/integration/**/*.test.ts',
  e2e: 'test/e2e/**/*.test.ts',
  versions: [
    'test/integration/deploy-manifests.test.ts',
    'test/integration/chart.test.ts',
    'test/integration/admission-policies.test.ts',
    'test/integration/doctor.test.ts',
    'test/e2e/node-harness.test.ts',
    'test/e2e/plugins-serve.test.ts',
    'test/e2e/device-workloads.test.ts',
    'test/e2e/dra.test.ts',
    'test/e2e/dra-taints.test.ts',
    'test/e2e/dra-all-devices.test.ts',
    'test/e2e/dra-extended-resources.test.ts',
    'test/e2e/dra-dropped-features.test.ts',
    'test/e2e/dra-runtime-cdi.test.ts',
    'test/e2e/dra-workloads.test.ts',
  ],
}
const part = process.env.NFDCTL_TEST_PART
if (part !== undefined && !(part in parts)) {
  throw new Error(`NFDCTL_TEST_PART must be one of ${Object.keys(parts).join(', ')}, got ${JSON.stringify(part)}`)
}

// Unit tests build many small trees of temporary files (fake sysfs and /proc, kubeconfigs, plugins): on a
// tmpfs they take a fraction of the time they take on a busy disk. An explicit TMPDIR is kept.
if (part === 'unit' && process.env.TMPDIR === undefined && writableDir('/dev/shm')) process.env.TMPDIR = '/dev/shm'

function writableDir(path) {
  try {
    accessSync(path, constants.W_OK | constants.X_OK)
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

module.exports = {
  'node-option': ['import=tsx'],
  spec: part === undefined ? [parts.unit, parts.integration, parts.e2e] : [parts[part]].flat(),
  require: ['test/support/hooks.ts'],
  reporter: './test/support/spec-with-summary.cjs',
  'forbid-only': true,
  timeout: 30000,
}
