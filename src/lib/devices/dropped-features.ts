import {draClassName, resourceNameOf} from './resource-names.js'

/**
 * What the cluster's API server drops of what the DRA driver writes, as the driver saw it in what the API
 * server returned (its feature gates are not visible to it): a field a gate that is off does not store.
 */
export interface DroppedFeatures {
  /** A resource.k8s.io DeviceClass came back without its extendedResourceName (DRAExtendedResource off). */
  readonly extendedResourceName: boolean
  /** A ResourceSlice came back without its devices' taints (DRADeviceTaints off). */
  readonly taints: boolean
}

export const noneDropped: DroppedFeatures = {extendedResourceName: false, taints: false}

/** The feature gate behind each field the API server may drop, and the components that must have it on. */
export const droppedFeatureGates: Readonly<Record<keyof DroppedFeatures, {readonly gate: string; readonly components: string}>> = {
  extendedResourceName: {components: 'kube-apiserver, kube-scheduler, kube-controller-manager and kubelet', gate: 'DRAExtendedResource'},
  // kube-scheduler and kube-controller-manager 1.34 then watch DeviceTaintRules at resource.k8s.io/v1alpha3: unserved, no claim is scheduled.
  taints: {
    components: 'kube-apiserver, kube-scheduler and kube-controller-manager (on 1.34 also serve resource.k8s.io/v1alpha3: --runtime-config=resource.k8s.io/v1alpha3=true)',
    gate: 'DRADeviceTaints',
  },
}

/** A class-wide condition of a devices.nfdctl.io DeviceClass's status (metav1.Condition without its times). */
export interface ClassCondition {
  readonly type: string
  readonly status: 'True' | 'False'
  readonly reason: string
  readonly message: string
}

/**
 * Pure: the conditions a DRA class gets for what the API server drops, one per dropped feature, each saying
 * what pods get instead and what to do; none while nothing is dropped (a cluster with the gates on shows no
 * condition at all). Class-wide: the API server is the cluster's, so every node's agent says the same.
 */
export function droppedFeatureConditions(className: string, dropped: DroppedFeatures): ClassCondition[] {
  const conditions: ClassCondition[] = []
  if (dropped.extendedResourceName) {
    const resource = resourceNameOf(className)
    const {components, gate} = droppedFeatureGates.extendedResourceName
    conditions.push({
      message:
        `the API server drops the extendedResourceName ${resource} of resource.k8s.io DeviceClass ${draClassName(className)} `
        + `(feature gate ${gate} off): a pod that asks for ${resource} by resource limit is not served on this `
        + `cluster and stays Pending (Insufficient); ask by ResourceClaim instead, or turn ${gate} on in ${components}`,
      reason: 'ExtendedResourceDropped',
      status: 'False',
      type: 'LimitRequestsServed',
    })
  }
  if (dropped.taints) {
    const {components, gate} = droppedFeatureGates.taints
    conditions.push({
      message:
        `the API server drops ResourceSlice device taints (feature gate ${gate} off): an unplugged device leaves `
        + 'the slice instead of staying in it tainted, so an allocationMode: All claim is allocated the devices present '
        + 'rather than waiting for every device, and a claim whose device is unplugged keeps its allocation and gets the '
        + `device back when it is plugged in again, but a new claim cannot be given it meanwhile; turn ${gate} on `
        + `in ${components} to keep unplugged devices listed, tainted`,
      reason: 'DeviceTaintsDropped',
      status: 'False',
      type: 'UnpluggedDevicesTainted',
    })
  }
  return conditions
}
