import {expect} from 'chai'
import {readdir, readFile} from 'node:fs/promises'
import {join, posix} from 'node:path'
import {fileURLToPath} from 'node:url'

import {type Command, Flags, Parser} from '@oclif/core'
import {parse} from 'yaml'

import DevicesAgent from '../../../src/commands/devices/agent.js'
import GcOnce from '../../../src/commands/gc/once.js'
import GcRun from '../../../src/commands/gc/run.js'
import PluginsServe from '../../../src/commands/plugins/serve.js'
import {observeOptionsFrom, type ObserveOptions, type RawObserveFlags} from '../../../src/lib/observe/observe-options.js'
import {type Manifest, readManifests} from '../../../harness/controlplane/manifests.js'

const deployDir = fileURLToPath(new URL('../../../deploy/', import.meta.url))
const commands: Record<string, Command.Class> = {'devices agent': DevicesAgent, 'gc once': GcOnce, 'gc run': GcRun, 'plugins serve': PluginsServe}

/**
 * Parses a command line as the CLI would: an unknown flag, a bad option or a missing value throws. For a
 * long-running command, also where its /metrics, /healthz and /readyz listen (checked as the command checks it).
 */
async function parseCommandLine(where: string, argv: readonly string[]): Promise<Pick<ObserveOptions, 'metricsHost' | 'metricsPort'> | undefined> {
  const id = argv.slice(0, 2).join(' ')
  const command = commands[id]
  expect(command, `${where}: "${id}" is no nfdctl command`).to.not.equal(undefined)
  const flags = {...command!.flags, ...(command!.enableJsonFlag ? {json: Flags.boolean()} : {})}
  const parsed = await Parser.parse(argv.slice(2), {args: command!.args ?? {}, flags, strict: true}).catch((error: unknown) => {
    throw new Error(`${where}: ${argv.join(' ')}: ${(error as Error).message}`, {cause: error})
  })
  if (!('metrics-bind-address' in command!.flags)) return undefined
  try {
    const {metricsHost, metricsPort} = observeOptionsFrom(parsed.flags as unknown as RawObserveFlags, false)
    return {metricsHost, metricsPort}
  } catch (error) {
    throw new Error(`${where}: ${argv.join(' ')}: ${(error as Error).message}`, {cause: error})
  }
}

interface Container {
  args?: string[]
  command?: string[]
  ports?: Array<{name?: string; containerPort: number}>
}

function containersOf(doc: unknown): Container[] {
  const spec = (doc as {spec?: {template?: {spec?: {containers?: Container[]}}; jobTemplate?: {spec?: {template?: {spec?: {containers?: Container[]}}}}}}).spec
  return spec?.template?.spec?.containers ?? spec?.jobTemplate?.spec?.template?.spec?.containers ?? []
}

interface JsonPatchOp {
  op: string
  path: string
  value?: unknown
}

/** RFC 6902 add, replace and remove, as kustomize applies a JSON patch (`-` appends to a list). */
function applyJsonPatch(doc: unknown, ops: readonly JsonPatchOp[], where: string): void {
  for (const {op, path, value} of ops) {
    const keys = path
      .split('/')
      .slice(1)
      .map((k) => k.replaceAll('~1', '/').replaceAll('~0', '~'))
    const last = keys.pop()
    let parent = doc as Record<string, unknown> | unknown[] | undefined
    for (const key of keys) parent = (Array.isArray(parent) ? parent[Number(key)] : parent?.[key]) as typeof parent
    if (parent === undefined || last === undefined) throw new Error(`${where}: ${op} ${path}: no such place in the object`)
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last)
      if (op === 'add') parent.splice(index, 0, value)
      else if (op === 'replace') parent[index] = value
      else if (op === 'remove') parent.splice(index, 1)
      else throw new Error(`${where}: JSON patch op ${op} is not read by this test`)
    } else if (op === 'add' || op === 'replace') parent[last] = value
    else if (op === 'remove') delete parent[last]
    else throw new Error(`${where}: JSON patch op ${op} is not read by this test`)
  }
}

/**
 * The objects of deploy/<component> as its kustomization puts them together: its own files, those of the
 * directories it takes as resources (an overlay's base), and its JSON patches applied to their targets.
 * Without kubectl: this is a unit test. A patch of another kind fails it (deploy/ overlays use JSON patches).
 */
async function kustomizedDocs(component: string): Promise<Array<{file: string; doc: Manifest}>> {
  const kustomization = parse(await readFile(join(deployDir, component, 'kustomization.yaml'), 'utf8')) as {
    resources?: string[]
    patches?: Array<{path: string; target: {kind: string; name: string}}>
  }
  const docs: Array<{file: string; doc: Manifest}> = []
  for (const resource of kustomization.resources ?? []) {
    if (resource.endsWith('.yaml')) docs.push(...(await readManifests(component, [resource])).docs)
    else docs.push(...(await kustomizedDocs(posix.normalize(posix.join(component, resource)))).map(({doc, file}) => ({doc, file: `${resource}/${file}`})))
  }
  for (const {path, target} of kustomization.patches ?? []) {
    const where = `deploy/${component}/${path}`
    const ops = parse(await readFile(join(deployDir, component, path), 'utf8')) as unknown
    if (!Array.isArray(ops)) throw new Error(`${where}: not a JSON patch (a list of operations)`)
    const targets = docs.filter(({doc}) => doc.kind === target.kind && doc.metadata.name === target.name)
    expect(targets, `${where}: objects named by its target`).to.have.length(1)
    applyJsonPatch(targets[0].doc, ops as JsonPatchOp[], where)
    targets[0].file += ` (patched by ${path})`
  }
  return docs
}

// A renamed or removed flag must not leave a deploy file that only fails on a node.
describe('deploy/: every nfdctl command line parses with the current flags', function () {
  it('the DaemonSets, the Deployment and the CronJob', async function () {
    let checked = 0
    let listening = 0
    for (const component of ['agent', 'agent-dra', 'gc', 'gc/cronjob', 'plugins']) {
      for (const {doc, file} of await kustomizedDocs(component)) {
        for (const container of containersOf(doc)) {
          const where = `deploy/${component}/${file}`
          const listen = await parseCommandLine(where, container.args ?? [])
          // Pods are scraped and probed on the pod IP: every address of the pod, on the port named metrics.
          if (listen) {
            expect(listen, where).to.deep.equal({metricsHost: undefined, metricsPort: container.ports?.find((p) => p.name === 'metrics')?.containerPort})
            listening++
          }
          checked++
        }
      }
    }
    expect(checked).to.equal(5)
    expect(listening).to.equal(4)
  })

  it("deploy/agent-dra's agent is deploy/agent's with --dra and kubelet's directory", async function () {
    const agentArgs = async (component: string): Promise<string[]> => {
      const daemonSets = (await kustomizedDocs(component)).filter(({doc}) => doc.kind === 'DaemonSet')
      expect(daemonSets, `deploy/${component}`).to.have.length(1)
      return containersOf(daemonSets[0].doc)[0].args ?? []
    }
    expect(await agentArgs('agent-dra')).to.deep.equal([...(await agentArgs('agent')), '--dra', '--kubelet-dir=/var/lib/kubelet'])
  })

  it('the systemd units, with the variables of their environment files', async function () {
    const units = (await readdir(join(deployDir, 'systemd'))).filter((f) => f.endsWith('.service'))
    expect(units).to.have.length(3)
    for (const unit of units) {
      const text = await readFile(join(deployDir, 'systemd', unit), 'utf8')
      const envFile = text.match(/^EnvironmentFile=\/etc\/nfdctl\/(\S+)$/m)?.[1]
      expect(envFile, `${unit}: EnvironmentFile`).to.be.a('string')
      const env = new Map<string, string>()
      const envText = await readFile(join(deployDir, 'systemd', unit.replace('.service', '.env')), 'utf8')
      for (const line of envText.split('\n')) {
        const m = line.match(/^([A-Z_]+)=(.*)$/)
        if (m) env.set(m[1]!, m[2]!)
      }
      const exec = text.match(/^ExecStart=(\S+) (.*)$/m)
      expect(exec?.[1], `${unit}: ExecStart`).to.equal('/usr/bin/nfdctl')
      // systemd's rules: ${VAR} is one word, $VAR splits on whitespace; each must be in the env file.
      const argv = exec![2]!.split(/\s+/).flatMap((word) => {
        const braced = word.match(/^\$\{([A-Z_]+)\}$/)
        const bare = word.match(/^\$([A-Z_]+)$/)
        const name = braced?.[1] ?? bare?.[1]
        if (name === undefined) return [word]
        expect(env.has(name), `${unit}: ${name} is not in ${envFile}`).to.equal(true)
        return braced ? [env.get(name)!] : env.get(name)!.split(/\s+/).filter(Boolean)
      })
      const listen = await parseCommandLine(`deploy/systemd/${unit}`, argv)
      // A unit runs in the host's network namespace: its endpoints stay on loopback.
      expect(listen?.metricsHost, `${unit}: --metrics-bind-address`).to.equal('127.0.0.1')
    }
  })

  it('a flag the command does not have is caught', async function () {
    let message = ''
    await parseCommandLine('example', ['devices', 'agent', '--containerd-socket', '/run/containerd/containerd.sock']).catch((error: Error) => (message = error.message))
    expect(message).to.match(/^example: devices agent --containerd-socket .*Nonexistent flag: --containerd-socket/)
  })
})
