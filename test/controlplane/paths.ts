import {execFile} from 'node:child_process'
import {existsSync} from 'node:fs'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
export const buildScript = fileURLToPath(new URL('build.sh', import.meta.url))
export const crdDir = fileURLToPath(new URL('../../deploy/crds', import.meta.url))

/** What build.sh builds beside kube-apiserver and etcd, when asked. */
export type ExtraBinary = 'kubelet' | 'kube-scheduler' | 'kube-controller-manager' | 'kubectl' | 'helm'

/**
 * Builds (or finds, when cached) kube-apiserver and etcd (and the extra binaries asked for) and returns their directory. The build script
 * prints the directory as its last line; its progress goes to stderr.
 */
export async function ensureBinaries(log: (line: string) => void = () => {}, extra: readonly ExtraBinary[] = []): Promise<string> {
  log(`control plane: looking for cached kube-apiserver, etcd${extra.map((e) => `, ${e}`).join('')} (a first build takes 10-25 minutes)`)
  const {stdout} = await promisify(execFile)('bash', [buildScript, ...extra], {maxBuffer: 64 * 1024 * 1024})
  const dir = stdout.trim().split('\n').at(-1) ?? ''
  if (!['kube-apiserver', 'etcd', ...extra].every((binary) => existsSync(`${dir}/${binary}`))) throw new Error(`control plane build printed no binary directory (got "${dir}")`)
  return dir
}
