import {command} from './app-layer.js'

/** The namespace kubelet's CRI plugin keeps its images in. */
export const kubernetesNamespace = 'k8s.io'

/**
 * Imports the archive into a containerd (its socket) with `ctr`, every platform's content included so
 * the stored image is the whole index (the digest a registry would serve). The name comes from the
 * archive's `io.containerd.image.name` annotation.
 */
export async function loadIntoContainerd(archive: string, socket: string, log: (line: string) => void): Promise<void> {
  await command('ctr', ['--address', socket, '--namespace', kubernetesNamespace, 'images', 'import', '--all-platforms', archive], {log})
}
