import {copyFile, mkdir, mkdtemp, rename, rm, stat} from 'node:fs/promises'
import {homedir, tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {parseAllDocuments} from 'yaml'

import type {Manifest} from '../../harness/controlplane/manifests.js'
import {ensureBinaries} from '../../harness/controlplane/paths.js'
import {type RunResult, runToEnd} from '../../harness/process/run-to-end.js'
import {missingPrerequisite} from './prerequisites.js'
import {stopAtRunEnd} from './run-end.js'

// Helm and kubectl for the chart tests (charts/nfdctl), both built from the Go module proxy by
// harness/controlplane/build.sh, and prometheus-operator's ServiceMonitor and PodMonitor CRDs from the same proxy.

export const chartDir = fileURLToPath(new URL('../../charts/nfdctl', import.meta.url))
export const deployDir = fileURLToPath(new URL('../../deploy', import.meta.url))

/** prometheus-operator's release whose CRDs the monitors are checked against. */
export const prometheusOperatorVersion = 'v0.85.0'

const log = (line: string): void => {
  process.stderr.write(`      ${line}\n`)
}

export interface Tools {
  readonly helm: string
  readonly kubectl: string
}

let tools: Promise<Tools> | undefined
let helmHome: Promise<string> | undefined

/** helm and kubectl (built and cached on first use); missing ones skip the test, or fail it under CI=true. */
export async function chartTools(context: Mocha.Context): Promise<Tools> {
  context.timeout(40 * 60_000) // a cold build of kube-apiserver, kubectl and helm on 2 cores
  tools ??= ensureBinaries(log, ['helm', 'kubectl']).then((dir) => ({helm: join(dir, 'helm'), kubectl: join(dir, 'kubectl')}))
  try {
    return await tools
  } catch (error) {
    return missingPrerequisite(context, `helm and kubectl could not be built: ${(error as Error).message.split('\n').slice(-3).join(' ')}`)
  }
}

/** Helm with its cache, configuration and data in a directory of this run: nothing is read from or left in $HOME. */
export async function helm(tools: Tools, args: readonly string[]): Promise<RunResult> {
  helmHome ??= mkdtemp(join(tmpdir(), 'nfdctl-helm-'))
  const home = await helmHome
  return runToEnd(tools.helm, args, {env: {...process.env, HELM_CACHE_HOME: join(home, 'cache'), HELM_CONFIG_HOME: join(home, 'config'), HELM_DATA_HOME: join(home, 'data')}})
}

stopAtRunEnd(async () => {
  if (helmHome !== undefined) await rm(await helmHome, {force: true, recursive: true})
})

export interface RenderOptions {
  readonly release?: string
  readonly namespace?: string
  readonly valuesFiles?: readonly string[]
  /** --set-json pairs: value paths and their values. */
  readonly values?: Record<string, unknown>
}

/** `helm template` arguments for charts/nfdctl. */
export function templateArgs(options: RenderOptions = {}): string[] {
  return [
    'template',
    options.release ?? 'nfdctl',
    chartDir,
    '--namespace',
    options.namespace ?? 'nfdctl-system',
    ...(options.valuesFiles ?? []).flatMap((file) => ['--values', file]),
    ...Object.entries(options.values ?? {}).flatMap(([path, value]) => ['--set-json', `${path}=${JSON.stringify(value)}`]),
  ]
}

export interface Render {
  /** The YAML stream helm printed. */
  readonly text: string
  readonly objects: Manifest[]
  /** The template file of each object (`# Source:`), in the same order. */
  readonly sources: string[]
}

/** Renders charts/nfdctl; a failed render throws with helm's message. */
export async function renderChart(tools: Tools, options: RenderOptions = {}): Promise<Render> {
  const result = await helm(tools, templateArgs(options))
  if (result.code !== 0) throw new Error(`helm ${templateArgs(options).join(' ')} failed (exit ${result.code}): ${result.stderr.trim()}`)
  return {...parseStream(result.stdout), text: result.stdout}
}

/** The objects of a YAML stream (empty documents left out) and the `# Source:` comment above each. */
export function parseStream(text: string): {objects: Manifest[]; sources: string[]} {
  const objects: Manifest[] = []
  const sources: string[] = []
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`unparsable YAML in a render: ${doc.errors[0].message}`)
    const object = doc.toJS() as Manifest | null
    if (object === null) continue
    objects.push(object)
    // Helm's `# Source:` line opens the document's first comment, which yaml attaches to the document or to its contents.
    const comment = `${doc.commentBefore ?? ''}\n${(doc.contents as {commentBefore?: string} | null)?.commentBefore ?? ''}`
    sources.push(/^ ?Source: (\S+)/m.exec(comment)?.[1] ?? '')
  }
  return {objects, sources}
}

/** `kubectl kustomize <dir>`, parsed. */
export async function kustomize(tools: Tools, dir: string): Promise<Manifest[]> {
  const result = await runToEnd(tools.kubectl, ['kustomize', dir])
  if (result.code !== 0) throw new Error(`kubectl kustomize ${dir} failed (exit ${result.code}): ${result.stderr.trim()}`)
  return parseStream(result.stdout).objects
}

function cacheRoot(): string {
  return process.env.NFDCTL_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(process.env.HOME ?? homedir(), '.cache'), 'nfdctl')
}

const monitorCrdFiles = ['monitoring.coreos.com_servicemonitors.yaml', 'monitoring.coreos.com_podmonitors.yaml']

/**
 * prometheus-operator's ServiceMonitor and PodMonitor CRDs (its example/prometheus-operator-crd/), downloaded
 * as the Go module from the module proxy once and kept in the cache beside the control plane's binaries.
 */
export async function prometheusOperatorCrds(): Promise<string[]> {
  const dir = join(cacheRoot(), `prometheus-operator-${prometheusOperatorVersion}-crds`)
  const files = monitorCrdFiles.map((file) => join(dir, file))
  if (
    (
      await Promise.all(
        files.map((file) =>
          stat(file).then(
            () => true,
            () => false,
          ),
        ),
      )
    ).every(Boolean)
  )
    return files
  log(`prometheus-operator ${prometheusOperatorVersion}: downloading its CRDs from the Go module proxy`)
  const work = await mkdtemp(join(tmpdir(), 'nfdctl-promop-'))
  try {
    const result = await runToEnd('go', ['mod', 'download', '-json', `github.com/prometheus-operator/prometheus-operator@${prometheusOperatorVersion}`], {
      cwd: work,
      env: {...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local'},
    })
    if (result.code !== 0) throw new Error(`go mod download of prometheus-operator ${prometheusOperatorVersion} failed: ${(result.stderr || result.stdout).trim()}`)
    const module = JSON.parse(result.stdout) as {Dir?: string; Error?: string}
    if (module.Dir === undefined) throw new Error(`go mod download of prometheus-operator ${prometheusOperatorVersion} gave no directory: ${module.Error ?? result.stdout}`)
    // Copied into a fresh directory beside the cache's, then renamed into place: a reader never sees half of them.
    await mkdir(cacheRoot(), {recursive: true})
    const staging = await mkdtemp(join(cacheRoot(), '.prometheus-operator-'))
    try {
      for (const file of monitorCrdFiles) await copyFile(join(module.Dir, 'example', 'prometheus-operator-crd', file), join(staging, file))
      await rename(staging, dir).catch((error: NodeJS.ErrnoException) => {
        // Another run put them there first.
        if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error
      })
    } finally {
      await rm(staging, {force: true, recursive: true})
    }
    return files
  } finally {
    await rm(work, {force: true, recursive: true})
  }
}
