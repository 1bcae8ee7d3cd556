import type {PodResources} from '../../src/lib/kubelet/device-plugin-api.js'

/** kubelet's PodResources API without kubelet: what List answers is set by the test, and each call counted. */
export class FakePodResources {
  readonly pods: PodResources[] = []
  calls = 0
  /** List fails with this while set (kubelet away). */
  failure: Error | undefined

  /** kubelet gave the container these devices of a resource. */
  allocate(pod: {namespace: string; name: string}, container: string, resourceName: string, deviceIds: string[]): void {
    this.pods.push({containers: [{devices: [{device_ids: deviceIds, resource_name: resourceName}], name: container}], name: pod.name, namespace: pod.namespace})
  }

  readonly list = async (): Promise<PodResources[]> => {
    this.calls++
    if (this.failure !== undefined) throw this.failure
    return this.pods
  }
}
