// What the Kubernetes release the tests run (KUBE_VERSION; startControlPlane checks the server runs it) does
// with its default feature gates, read from each release's pkg/features/kube_features.go and
// staging/src/k8s.io/apiserver/pkg/features/kube_features.go, and with the gates KUBE_FEATURE_GATES sets on
// every component. The suites choose their expectations from this table, never from what the agent or doctor
// finds: those are what the tests check.
import {kubeFeatureGates, kubeMinor, kubeVersion, kubeVersions} from '../../harness/controlplane/paths.js'
import {skipReasonKey} from './prerequisites.js'

export {kubeMinor, kubeVersion}
if (!Number.isInteger(kubeMinor)) throw new Error(`KUBE_VERSION ${kubeVersion} is not a release such as ${kubeVersions.at(-1)}`)

/** What the cluster's gates turn on that the DRA driver's features depend on: the release's default, or KUBE_FEATURE_GATES. */
export const clusterGates = {
  /** DRADeviceTaints: alpha and off in 1.33-1.35, beta and on in 1.36, GA in 1.37. Off, device taints are dropped on write. */
  deviceTaints: kubeFeatureGates.DRADeviceTaints ?? kubeMinor >= 36,
  /**
   * DRADeviceTaintRules: absent in 1.34, alpha and off in 1.35, beta and off in 1.36 (served only by the beta
   * APIs, off), GA in 1.37: resource.k8s.io/v1 serves DeviceTaintRules from 1.37.
   */
  deviceTaintRules: kubeFeatureGates.DRADeviceTaintRules ?? kubeMinor >= 37,
  /** DRAExtendedResource: alpha and off in 1.34-1.35, beta and on in 1.36, GA and locked on in 1.37. Off, extendedResourceName is dropped. */
  extendedResource: kubeFeatureGates.DRAExtendedResource ?? kubeMinor >= 36,
  /** ResourceHealthStatus: alpha and off through 1.35, beta and on in 1.36: kubelet writes device health into the pod's status. */
  resourceHealthStatus: kubeFeatureGates.ResourceHealthStatus ?? kubeMinor >= 36,
} as const

/** What the release and its gates are called in the report: `v1.34.4`, or `v1.34.4 with DRAExtendedResource=true`. */
export const clusterName = `${kubeVersion}${Object.keys(kubeFeatureGates).length > 0 ? ` with ${process.env.KUBE_FEATURE_GATES}` : ''}`

/**
 * `describe` where `on`, else `describe.skip` with the reason beside each skipped test in the report: a suite
 * whose feature the release's default gates leave off (another suite tests what the cluster says instead).
 */
export function describeWhere(on: boolean, reason: string): (title: string, fn: (this: Mocha.Suite) => void) => void {
  return (title, fn) => {
    if (on) {
      describe(title, fn)
      return
    }
    const suite = describe.skip(title, fn) as Mocha.Suite | undefined
    if (suite !== undefined) Object.assign(suite, {[skipReasonKey]: `${reason} on Kubernetes ${clusterName}`})
  }
}
