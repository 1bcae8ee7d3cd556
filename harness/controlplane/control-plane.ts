import type {ChildProcess} from 'node:child_process'
import {mkdir, readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {outsideTestNetns} from '../node/netns.js'
import {launchDaemon, terminate} from '../process/daemon.js'
import {freePort} from '../process/free-port.js'
import {waitFor} from '../process/wait.js'
import {createCertificates, mintClientCertificate} from './certs.js'
import {applyCrds, readCrds} from './crds.js'
import {apiserverGateFlags, crdDir, featureGatesFlag} from './paths.js'

export interface ControlPlaneOptions {
  /** Working directory: certificates, etcd data, logs, kubeconfigs, state.json. */
  readonly dir: string
  /** Directory holding kube-apiserver and etcd (harness/controlplane/build.sh prints it). */
  readonly binDir: string
  /** Leave the processes running when this process exits (npm run cluster:up). */
  readonly detached?: boolean
  readonly apiserverFlags?: readonly string[]
  /**
   * CPUs etcd and kube-apiserver may run on (taskset's list form, "0" or "0-2"), so that a benchmark's
   * clients do not take CPU from the server they measure; default: all.
   */
  readonly cpus?: string
  /**
   * Serve a node's pods as well: the apiserver listens on `nodeIp` too and advertises it (the `kubernetes`
   * Service's endpoint), admits pods with service-account tokens, and kube-controller-manager and
   * kube-scheduler run beside it (DaemonSets, Deployments, Jobs, leader election). Only inside the test's
   * network namespace, where every address is the run's own.
   */
  readonly cluster?: {readonly nodeIp: string}
  readonly log?: (line: string) => void
}

/** The ClusterIP of the `kubernetes` Service: the first address of --service-cluster-ip-range. */
export const kubernetesServiceIp = '10.0.0.1'

interface State {
  readonly pids: {etcd: number; apiserver: number; controllerManager?: number; scheduler?: number}
  readonly server: string
  readonly etcdUrl: string
  readonly ports: {apiserver: number; etcdClient: number; etcdPeer: number}
}

/**
 * A real etcd + kube-apiserver on loopback, started the way envtest does: generated CA and serving cert,
 * client-certificate admin in system:masters, RBAC on, CRDs from deploy/crds applied and Established.
 */
export class ControlPlane {
  readonly kubeconfig: string
  readonly #children: ChildProcess[] = []
  #stopped = false

  private constructor(
    readonly options: ControlPlaneOptions,
    readonly state: State,
  ) {
    this.kubeconfig = join(options.dir, 'kubeconfig')
  }

  get server(): string {
    return this.state.server
  }

  get etcdUrl(): string {
    return this.state.etcdUrl
  }

  static async start(options: ControlPlaneOptions): Promise<ControlPlane> {
    const log = options.log ?? (() => {})
    const started = Date.now()
    const outside = options.cluster === undefined ? undefined : await outsideTestNetns()
    if (outside !== undefined) throw new Error(`a control plane that serves pods listens beyond loopback: ${outside}`)
    await mkdir(options.dir, {recursive: true})
    await createCertificates(options.dir, options.cluster === undefined ? [] : [options.cluster.nodeIp, kubernetesServiceIp])
    const ports = {apiserver: await freePort(), etcdClient: await freePort(), etcdPeer: await freePort()}
    const etcdUrl = `http://127.0.0.1:${ports.etcdClient}`
    const server = `https://127.0.0.1:${ports.apiserver}`
    const children: ChildProcess[] = []
    const etcd = launch(options, 'etcd', [
      `--data-dir=${join(options.dir, 'etcd-data')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${ports.etcdPeer}`,
      `--initial-cluster=default=http://127.0.0.1:${ports.etcdPeer}`,
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ])
    children.push(etcd)
    await waitFor('etcd /health', async () => (await fetch(`${etcdUrl}/health`)).ok, {timeoutMs: 30_000})
    const apiserver = launch(options, 'kube-apiserver', apiserverArgs(options, ports, etcdUrl))
    children.push(apiserver)
    const pids: {-readonly [K in keyof State['pids']]: State['pids'][K]} = {apiserver: apiserver.pid!, etcd: etcd.pid!}
    const state: State = {etcdUrl, pids, ports, server}
    const plane = new ControlPlane(options, state)
    plane.#children.push(...children)
    try {
      await plane.#writeKubeconfig(plane.kubeconfig, 'admin', {cert: join(options.dir, 'admin.crt'), key: join(options.dir, 'admin.key')})
      const client = await plane.client()
      try {
        await plane.#waitReady(client, apiserver)
        await applyCrds(client, await readCrds(crdDir))
        if (options.cluster !== undefined) Object.assign(pids, await plane.#startControllers(client))
      } finally {
        client.close()
      }
      await writeFile(join(options.dir, 'state.json'), JSON.stringify(state, null, 2))
    } catch (error) {
      await plane.stop()
      throw error
    }
    log(`control plane: ready at ${server} in ${((Date.now() - started) / 1000).toFixed(1)}s`)
    return plane
  }

  /** Stops processes started by an earlier `start({detached: true})`, from its state.json. */
  static async stopDetached(dir: string): Promise<boolean> {
    let state: State
    try {
      state = JSON.parse(await readFile(join(dir, 'state.json'), 'utf8')) as State
    } catch {
      return false
    }
    for (const pid of [state.pids.scheduler, state.pids.controllerManager, state.pids.apiserver, state.pids.etcd]) if (pid !== undefined) await terminate(pid)
    return true
  }

  /** An admin client (system:masters) with generous limits for seeding. */
  async client(kubeconfig = this.kubeconfig): Promise<KubeClient> {
    const {client} = await openCluster({kubeconfig}, {burst: 2000, maxConnections: 64, qps: 2000})
    return client
  }

  /** Mints a client certificate for `user` in `groups` and writes a kubeconfig for it; returns its path. */
  async kubeconfigFor(user: string, groups: readonly string[] = []): Promise<string> {
    const {cert, key} = await mintClientCertificate(this.options.dir, user, groups)
    const path = join(this.options.dir, `kubeconfig-${user.replaceAll(':', '_')}`)
    await this.#writeKubeconfig(path, user, {cert, key})
    return path
  }

  /** Writes a kubeconfig named after `name` that authenticates with the bearer `token`; returns its path. */
  async kubeconfigWithToken(name: string, token: string): Promise<string> {
    const path = join(this.options.dir, `kubeconfig-token-${name.replaceAll(':', '_')}`)
    await this.#writeKubeconfig(path, name, {token})
    return path
  }

  /** Compacts etcd up to `revision` through its JSON gateway (expires older continue tokens). */
  async compactEtcd(revision: string): Promise<void> {
    const res = await fetch(`${this.etcdUrl}/v3/kv/compaction`, {body: JSON.stringify({physical: true, revision}), method: 'POST'})
    if (!res.ok) throw new Error(`etcd compaction at ${revision} failed: ${res.status} ${await res.text()}`)
  }

  /** Defragments etcd's database (after a compaction, gives the freed pages back). */
  async defragmentEtcd(): Promise<void> {
    const res = await fetch(`${this.etcdUrl}/v3/maintenance/defragment`, {body: '{}', method: 'POST'})
    if (!res.ok) throw new Error(`etcd defragmentation failed: ${res.status} ${await res.text()}`)
  }

  /** The current etcd revision. */
  async etcdRevision(): Promise<string> {
    const res = await fetch(`${this.etcdUrl}/v3/kv/range`, {body: JSON.stringify({key: Buffer.from('/').toString('base64')}), method: 'POST'})
    const body = (await res.json()) as {header: {revision: string}}
    return body.header.revision
  }

  /** Stops kube-apiserver (SIGTERM) and starts it again on the same port and etcd; resolves when ready. */
  async restartApiserver(downtimeMs = 0): Promise<void> {
    const old = this.#children.find((c) => c.spawnargs[0].endsWith('kube-apiserver'))!
    await terminate(old.pid, old)
    this.#children.splice(this.#children.indexOf(old), 1)
    await sleep(downtimeMs)
    const apiserver = launch(this.options, 'kube-apiserver', apiserverArgs(this.options, this.state.ports, this.etcdUrl))
    this.#children.push(apiserver)
    const client = await this.client()
    try {
      await this.#waitReady(client, apiserver)
    } finally {
      client.close()
    }
  }

  /** Stops kube-apiserver, then etcd. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return
    this.#stopped = true
    for (const child of [...this.#children].reverse()) await terminate(child.pid, child)
  }

  /**
   * kube-controller-manager (every default controller; it publishes kube-root-ca.crt, which projected
   * service-account volumes need, and creates each namespace's `default` ServiceAccount) and kube-scheduler,
   * both as admin on the loopback address, serving no port of their own. Resolves once the controllers work.
   */
  async #startControllers(client: KubeClient): Promise<{controllerManager: number; scheduler: number}> {
    const file = (name: string): string => join(this.options.dir, name)
    const common = [`--kubeconfig=${this.kubeconfig}`, '--leader-elect=false', '--secure-port=0', ...featureGatesFlag()]
    const controllerManager = launch(this.options, 'kube-controller-manager', [
      ...common,
      `--root-ca-file=${file('ca.crt')}`,
      `--service-account-private-key-file=${file('sa.key')}`,
      `--cluster-signing-cert-file=${file('ca.crt')}`,
      `--cluster-signing-key-file=${file('ca.key')}`,
      '--controllers=*',
      '--concurrent-gc-syncs=5',
    ])
    const scheduler = launch(this.options, 'kube-scheduler', common)
    this.#children.push(controllerManager, scheduler)
    await waitFor(
      'kube-controller-manager (kube-root-ca.crt and the default ServiceAccount)',
      async () => {
        for (const c of [controllerManager, scheduler]) if (c.exitCode !== null) throw new Error(`${c.spawnargs[0]} exited with ${c.exitCode}; see its log in ${this.options.dir}`)
        await client.request('GET', '/api/v1/namespaces/default/configmaps/kube-root-ca.crt')
        await client.request('GET', '/api/v1/namespaces/default/serviceaccounts/default')
        return true
      },
      {intervalMs: 250, timeoutMs: 90_000},
    )
    return {controllerManager: controllerManager.pid!, scheduler: scheduler.pid!}
  }

  async #waitReady(client: KubeClient, apiserver: ChildProcess): Promise<void> {
    await waitFor(
      'kube-apiserver /readyz',
      async () => {
        if (apiserver.exitCode !== null) throw new Error(`kube-apiserver exited with ${apiserver.exitCode}; see ${join(this.options.dir, 'kube-apiserver.log')}`)
        await client.request('GET', '/readyz')
        return true
      },
      {intervalMs: 250, timeoutMs: 90_000},
    )
    await waitFor(
      'namespace default',
      async () => {
        await client.request('GET', '/api/v1/namespaces/default')
        return true
      },
      {timeoutMs: 30_000},
    )
  }

  /** Writes a kubeconfig for `user`, with a client certificate and key (files) or a bearer token. */
  async #writeKubeconfig(path: string, user: string, credentials: {cert: string; key: string} | {token: string}): Promise<void> {
    const b64 = async (file: string): Promise<string> => (await readFile(file)).toString('base64')
    const userEntry = 'token' in credentials ? {token: credentials.token} : {'client-certificate-data': await b64(credentials.cert), 'client-key-data': await b64(credentials.key)}
    const kubeconfig = {
      apiVersion: 'v1',
      clusters: [{cluster: {'certificate-authority-data': await b64(join(this.options.dir, 'ca.crt')), server: this.state.server}, name: 'nfdctl-local'}],
      contexts: [{context: {cluster: 'nfdctl-local', user}, name: `${user}@nfdctl-local`}],
      'current-context': `${user}@nfdctl-local`,
      kind: 'Config',
      users: [{name: user, user: userEntry}],
    }
    await writeFile(path, JSON.stringify(kubeconfig, null, 2), {mode: 0o600})
  }
}

function apiserverArgs(options: ControlPlaneOptions, ports: State['ports'], etcdUrl: string): string[] {
  const file = (name: string): string => join(options.dir, name)
  const served =
    options.cluster === undefined
      ? // No default route on test machines: advertise loopback, and let nothing write the kubernetes Endpoints;
        // without kube-controller-manager no namespace gets a `default` ServiceAccount to admit pods with.
        ['--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', '--endpoint-reconciler-type=none', '--disable-admission-plugins=ServiceAccount']
      : // Inside the test namespace: the node address is the `kubernetes` endpoint pods reach through its ClusterIP.
        ['--bind-address=0.0.0.0', `--advertise-address=${options.cluster.nodeIp}`, '--endpoint-reconciler-type=lease']
  return [
    `--etcd-servers=${etcdUrl}`,
    `--secure-port=${ports.apiserver}`,
    ...served,
    `--tls-cert-file=${file('apiserver.crt')}`,
    `--tls-private-key-file=${file('apiserver.key')}`,
    `--client-ca-file=${file('ca.crt')}`,
    `--service-account-key-file=${file('sa.pub')}`,
    `--service-account-signing-key-file=${file('sa.key')}`,
    `--service-account-issuer=https://127.0.0.1:${ports.apiserver}/`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--authorization-mode=Node,RBAC',
    '--allow-privileged=true',
    `--cert-dir=${file('apiserver-certs')}`,
    ...apiserverGateFlags(),
    ...(options.apiserverFlags ?? []),
  ]
}

function launch(options: ControlPlaneOptions, binary: string, args: string[]): ChildProcess {
  const path = join(options.binDir, binary)
  // taskset execs the binary, so the pid is the component's; Go sizes GOMAXPROCS to the CPUs it is given.
  const [command, argv] = options.cpus === undefined ? [path, args] : ['taskset', ['--cpu-list', options.cpus, path, ...args]]
  return launchDaemon(command, argv, {detached: options.detached, logFile: join(options.dir, `${binary}.log`)})
}
