import {execFile} from 'node:child_process'
import {existsSync, readFileSync} from 'node:fs'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
export const buildScript = fileURLToPath(new URL('build.sh', import.meta.url))
export const crdDir = fileURLToPath(new URL('../../deploy/crds', import.meta.url))

/** The Kubernetes releases the node tests run on, oldest first (the file build.sh reads its default from). */
export const kubeVersions: readonly string[] = readFileSync(fileURLToPath(new URL('kube-versions', import.meta.url)), 'utf8')
  .split('\n')
  .map((line) => line.trim())
  .filter((line) => line !== '' && !line.startsWith('#'))

/** The release every component the harness starts runs: KUBE_VERSION, as build.sh builds it, else the newest. */
export const kubeVersion: string = process.env.KUBE_VERSION || (kubeVersions.at(-1) as string)

/** The minor version of kubeVersion (v1.34.4 → 34). */
export const kubeMinor: number = Number.parseInt(kubeVersion.split('.')[1] ?? '', 10)

/**
 * Feature gates every component the harness starts gets (kube-apiserver, kube-controller-manager, kube-scheduler
 * and kubelet), from KUBE_FEATURE_GATES in --feature-gates form (`DRAExtendedResource=true,DRADeviceTaints=true`):
 * a cluster whose operator turned gates on. Empty: each release's defaults.
 */
export const kubeFeatureGates: Readonly<Record<string, boolean>> = Object.fromEntries(
  (process.env.KUBE_FEATURE_GATES ?? '')
    .split(',')
    .map((gate) => gate.trim())
    .filter(Boolean)
    .map((gate) => {
      const [name, value] = gate.split('=')
      if (name === undefined || !/^[A-Za-z0-9]+$/.test(name) || (value !== 'true' && value !== 'false')) throw new Error(`KUBE_FEATURE_GATES: "${gate}" is not Gate=true or Gate=false`)
      return [name, value === 'true'] as const
    }),
)

/**
 * kube-apiserver's flags for the gates set: with DRADeviceTaints on, kube-scheduler and kube-controller-manager
 * 1.34 watch DeviceTaintRules at resource.k8s.io/v1alpha3 (1.35 with DRADeviceTaintRules), which the API server
 * serves only when asked; unserved, their informers never sync and no claim is scheduled.
 */
export const apiserverGateFlags = (): string[] => {
  const watchesAlpha = (kubeMinor === 34 && kubeFeatureGates.DRADeviceTaints) || (kubeMinor === 35 && kubeFeatureGates.DRADeviceTaintRules)
  return [...featureGatesFlag(), ...(watchesAlpha ? ['--runtime-config=resource.k8s.io/v1alpha3=true'] : [])]
}

/** kubeFeatureGates as the components' --feature-gates flag (none when no gate is set). */
export const featureGatesFlag = (): string[] => {
  const gates = Object.entries(kubeFeatureGates)
  return gates.length === 0 ? [] : [`--feature-gates=${gates.map(([name, on]) => `${name}=${on}`).join(',')}`]
}

/** What build.sh builds beside kube-apiserver and etcd, when asked; `containerd` is containerd, ctr and the runc shim. */
export type ExtraBinary = 'kubelet' | 'kube-scheduler' | 'kube-controller-manager' | 'kubectl' | 'helm' | 'containerd' | 'containerd-1.7'

const containerdBinaries = ['containerd', 'ctr', 'containerd-shim-runc-v2'] as const

/** The node's runtime binaries, built from the Go module proxy into `<bin dir>/containerd/`. */
export type ContainerdBinary = (typeof containerdBinaries)[number]

export const containerdBinary = (binDir: string, name: ContainerdBinary): string => join(binDir, 'containerd', name)

/** The files an extra stands for, relative to the bin dir. */
const filesOf = (extra: ExtraBinary): string[] => (extra === 'containerd' ? containerdBinaries.map((name) => join('containerd', name)) : [extra])

/**
 * Builds (or finds, when cached) kube-apiserver and etcd (and the extra binaries asked for) and returns their directory. The build script
 * prints the directory as its last line; its progress goes to stderr.
 */
export async function ensureBinaries(log: (line: string) => void = () => {}, extra: readonly ExtraBinary[] = []): Promise<string> {
  log(`control plane: looking for cached kube-apiserver, etcd${extra.map((e) => `, ${e}`).join('')} (a first build takes 10-25 minutes)`)
  const {stdout} = await promisify(execFile)('bash', [buildScript, ...extra], {maxBuffer: 64 * 1024 * 1024})
  const dir = stdout.trim().split('\n').at(-1) ?? ''
  if (!['kube-apiserver', 'etcd', ...extra.flatMap(filesOf)].every((file) => existsSync(`${dir}/${file}`))) throw new Error(`control plane build printed no binary directory (got "${dir}")`)
  return dir
}
