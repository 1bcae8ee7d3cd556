import {readFile, writeFile} from 'node:fs/promises'
import {join} from 'node:path'
import {setTimeout as sleep} from 'node:timers/promises'

import {expect} from 'chai'
import {parse, stringify} from 'yaml'

import {nodeClassStatus, StatusWriter} from '../../src/lib/agent/status-writer.js'
import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import {droppedFeatureConditions} from '../../src/lib/devices/dropped-features.js'
import {matchesLabelSelector} from '../../src/lib/devices/label-selector.js'
import type {Device, LabelSelector} from '../../src/lib/devices/types.js'
import {ClaimStatusWriter} from '../../src/lib/dra/claim-status-writer.js'
import type {ClaimDeviceStatus} from '../../src/lib/dra/device-health.js'
import {classSelector, DraDeviceClasses, draDeviceClassOf} from '../../src/lib/dra/dra-device-classes.js'
import type {SliceDevice} from '../../src/lib/dra/resource-slices.js'
import {SlicePublisher} from '../../src/lib/dra/slice-publisher.js'
import {KubeApiError} from '../../src/lib/kube/api-error.js'
import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import {createLogger} from '../../src/lib/observe/logger.js'
import type {ControlPlane} from '../../harness/controlplane/control-plane.js'
import {placeManifest, readManifests} from '../../harness/controlplane/manifests.js'
import {waitFor} from '../../harness/process/wait.js'
import {startControlPlane} from '../support/cluster.js'
import {deviceClass as heldClass, deviceClassManifest} from '../support/device-class.js'
import {clusterGates, kubeMinor} from '../support/kube-version.js'
import {sink} from '../support/sink.js'
import {rejection} from '../support/thrown.js'

// deploy/agent's and deploy/agent-dra's ValidatingAdmissionPolicies (with deploy/agent-dra's role, which they
// narrow), and the ResourceQuota recipe for the device-plugin path, on a real kube-apiserver of their own: the
// annotation policy judges every pod that asks for a class, so it must not reach the pods of other suites on the
// shared control plane. No kubelet, scheduler or controller-manager runs here: pods stay Pending, which is all
// admission and a pod-bound service account token need.

type Json = Record<string, unknown>

const annotation = (classes: string): Record<string, string> => ({'devices.nfdctl.io/main': classes})
const podsOf = (namespace: string): string => `/api/v1/namespaces/${namespace}/pods`
const classStatusPath = (name: string): string => `${deviceClassesPath}/${name}/status`
const mergePatch = 'application/merge-patch+json'

interface PodOptions {
  readonly annotations?: Record<string, string>
  readonly limits?: Record<string, string>
  readonly nodeName?: string
  readonly serviceAccountName?: string
}

function pod(name: string, options: PodOptions = {}): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {annotations: options.annotations, name},
    spec: {
      containers: [{image: 'busybox', name: 'main', resources: options.limits === undefined ? undefined : {limits: options.limits}}],
      nodeName: options.nodeName,
      serviceAccountName: options.serviceAccountName,
    },
  }
}

/** A class taken by annotation in the namespaces `namespaceSelector` selects (none without it). */
const deviceClass = (name: string, namespaceSelector?: LabelSelector): Json => deviceClassManifest(name, namespaceSelector === undefined ? {} : {annotationAccess: {namespaceSelector}})

/** The API server's refusal of `action`; fails the test when it is accepted. */
const refusal = (action: () => Promise<unknown>): Promise<KubeApiError> => rejection(action(), KubeApiError)

/** Whether `error` is a refusal by the ValidatingAdmissionPolicy `policy`. */
const refusedBy = (error: unknown, policy: string): error is KubeApiError =>
  error instanceof KubeApiError && error.statusClass === 'Forbidden' && error.serverMessage.includes(`ValidatingAdmissionPolicy '${policy}'`)

/**
 * Waits until the dry-run `request` is refused as `expected` tells; it failing any other way fails the wait at
 * once, but for a refusal `notYet` tells to wait through.
 */
async function untilRefused(what: string, request: () => Promise<unknown>, expected: (error: unknown) => boolean, notYet: (error: unknown) => boolean = () => false): Promise<void> {
  await waitFor(
    what,
    async () => {
      try {
        await request()
        return false
      } catch (error) {
        if (expected(error)) return true
        if (notYet(error)) return false
        throw error
      }
    },
    {timeoutMs: 60_000},
  )
}

const annotationPolicy = 'nfdctl-device-annotation-access'
const statusPolicy = 'nfdctl-agent-own-node-status'
const slicePolicy = 'nfdctl-agent-own-node-slices'
const draClassPolicy = 'nfdctl-agent-dra-device-classes'
const claimPolicy = 'nfdctl-agent-own-node-claims'
/** The agent's service account's user name, impersonated: a user with no extras at all. */
const agentUser = 'system:serviceaccount:nfdctl-system:nfdctl-agent'

describe('deploy/agent and deploy/agent-dra admission policies and a device quota, on a real kube-apiserver', function () {
  let plane: ControlPlane
  let client: KubeClient
  let sentinels = 0

  async function createNamespace(name: string, labels: Record<string, string> = {}): Promise<void> {
    await client.request('POST', '/api/v1/namespaces', {body: {apiVersion: 'v1', kind: 'Namespace', metadata: {labels, name}}})
  }

  /**
   * Waits until the annotation policy is in force and has seen every DeviceClass change made so far: a class
   * created now, closed to annotations, refuses a probe (the policy's param informer takes class events in
   * order, so it has every earlier one too). A policy takes effect asynchronously, so every step that
   * creates or edits classes ends here.
   */
  async function annotationPolicyCaughtUp(): Promise<void> {
    const name = `sentinel-${++sentinels}`
    await client.request('POST', deviceClassesPath, {body: deviceClass(name)})
    await untilRefused(
      `ValidatingAdmissionPolicy ${annotationPolicy} to refuse a pod asking for DeviceClass ${name}`,
      () => client.request('POST', podsOf('probe'), {body: pod('probe', {annotations: annotation(name)}), query: {dryRun: 'All'}}),
      (error) => refusedBy(error, annotationPolicy) && error.serverMessage.includes(name),
    )
  }

  /** Waits until a new pod asking for `className` in `namespace` is refused (the policy has seen the namespace's labels). */
  async function refusedIn(namespace: string, className: string): Promise<void> {
    await untilRefused(
      `a pod asking for ${className} in namespace ${namespace} to be refused`,
      () => client.request('POST', podsOf(namespace), {body: pod('probe', {annotations: annotation(className)}), query: {dryRun: 'All'}}),
      (error) => refusedBy(error, annotationPolicy),
    )
  }

  /**
   * A token for the agent's service account (deploy/agent's, in nfdctl-system) from the TokenRequest API,
   * bound to the pod `podName` there as kubelet's projected token is, and a client using it.
   */
  async function clientBoundTo(podName: string): Promise<KubeClient> {
    const namespace = 'nfdctl-system'
    const boundPod = await client.request<{metadata: {uid: string}}>('GET', `${podsOf(namespace)}/${podName}`)
    const request = await client.request<{status: {token: string}}>('POST', `/api/v1/namespaces/${namespace}/serviceaccounts/nfdctl-agent/token`, {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: {boundObjectRef: {apiVersion: 'v1', kind: 'Pod', name: podName, uid: boundPod.metadata.uid}, expirationSeconds: 3600},
      },
    })
    const kubeconfig = await plane.kubeconfigWithToken(podName, request.status.token)
    return (await openCluster({kubeconfig}, {burst: 100, qps: 100})).client
  }

  /** A kubeconfig of the administrator impersonating `user` with no groups or extras: a user with no extras at all. */
  async function impersonating(user: string): Promise<string> {
    const config = parse(await readFile(plane.kubeconfig, 'utf8')) as {users: Array<{user: Json}>}
    for (const entry of config.users) entry.user.as = user
    const path = join(plane.options.dir, `kubeconfig-as-${user.replaceAll(':', '_')}`)
    await writeFile(path, stringify(config))
    return path
  }

  before(async function () {
    this.timeout(10 * 60_000)
    plane = await startControlPlane(this)
    client = await plane.client()
    const {docs, namespace} = await readManifests('agent', ['namespace.yaml', 'rbac.yaml', 'annotation-access-policy.yaml', 'status-policy.yaml'])
    for (const {doc} of docs) {
      const {body, collection} = placeManifest(doc, namespace)!
      await client.request('POST', collection, {body})
    }
    await createNamespace('probe')
  })

  after(function () {
    client?.close()
  })

  describe(`ValidatingAdmissionPolicy ${annotationPolicy}: pods take a class by annotation only where the class admits them`, function () {
    before(async function () {
      this.timeout(60_000)
      await createNamespace('lab', {team: 'lab'})
      await createNamespace('elsewhere')
      await client.request('POST', deviceClassesPath, {body: deviceClass('lab-serial', {matchLabels: {team: 'lab'}})})
      await client.request('POST', deviceClassesPath, {body: deviceClass('open', {})})
      await client.request('POST', deviceClassesPath, {body: deviceClass('closed')})
      await annotationPolicyCaughtUp()
    })

    it('creates a pod in a namespace the class selects, and refuses it in one it does not select, saying which class and namespace', async () => {
      const admitted = await client.request<{metadata: {annotations: Json}}>('POST', podsOf('lab'), {body: pod('admitted', {annotations: annotation('lab-serial')})})
      expect(admitted.metadata.annotations).to.deep.equal(annotation('lab-serial'))

      const error = await refusal(() => client.request('POST', podsOf('elsewhere'), {body: pod('refused', {annotations: annotation('lab-serial')})}))
      expect(error.code).to.equal(403)
      expect(error.serverMessage)
        .to.contain(`ValidatingAdmissionPolicy '${annotationPolicy}'`)
        .and.contain('DeviceClass (devices.nfdctl.io) lab-serial cannot be taken by pod annotation in namespace elsewhere')
        .and.contain('ask with the resource limit devices.nfdctl.io/lab-serial')
    })

    it('refuses a class without annotationAccess in every namespace, and admits a class whose selector is {} in every one', async () => {
      for (const namespace of ['lab', 'elsewhere']) {
        const error = await refusal(() => client.request('POST', podsOf(namespace), {body: pod('closed', {annotations: annotation('open, closed')})}))
        expect(error.serverMessage).to.contain('DeviceClass (devices.nfdctl.io) closed cannot be taken by pod annotation: it has no spec.annotationAccess')
        await client.request('POST', podsOf(namespace), {body: pod('open', {annotations: annotation(' open ')})})
      }
    })

    it('refuses an UPDATE that adds a class to a pod, and lets other updates through', async () => {
      await client.request('POST', podsOf('elsewhere'), {body: pod('plain')})
      const added = await refusal(() => client.request('PATCH', `${podsOf('elsewhere')}/plain`, {body: {metadata: {annotations: annotation('lab-serial')}}, contentType: mergePatch}))
      expect(added.serverMessage).to.contain('DeviceClass (devices.nfdctl.io) lab-serial cannot be taken by pod annotation in namespace elsewhere')
      // Through the status subresource as well: a status update keeps the metadata it carries.
      const throughStatus = await refusal(() => client.request('PATCH', `${podsOf('elsewhere')}/plain/status`, {body: {metadata: {annotations: annotation('lab-serial')}}, contentType: mergePatch}))
      expect(throughStatus.serverMessage).to.contain('DeviceClass (devices.nfdctl.io) lab-serial cannot be taken by pod annotation in namespace elsewhere')

      await client.request('POST', podsOf('lab'), {body: pod('holder', {annotations: annotation('lab-serial')})})
      const widened = await refusal(() => client.request('PATCH', `${podsOf('lab')}/holder`, {body: {metadata: {annotations: annotation('lab-serial,closed')}}, contentType: mergePatch}))
      expect(widened.serverMessage).to.contain('DeviceClass (devices.nfdctl.io) closed cannot be taken')
      await client.request('PATCH', `${podsOf('lab')}/holder`, {body: {metadata: {labels: {edited: 'yes'}}}, contentType: mergePatch})
    })

    it('lets a pod whose namespace is no longer admitted be updated (the agent takes its access back), but not given more', async () => {
      await createNamespace('leaving', {team: 'lab'})
      await client.request('POST', podsOf('leaving'), {body: pod('held', {annotations: annotation('lab-serial')})})
      await client.request('PATCH', '/api/v1/namespaces/leaving', {body: {metadata: {labels: {team: null}}}, contentType: mergePatch})
      await refusedIn('leaving', 'lab-serial')

      // Finalizers, labels and other edits must not wedge the pod: its annotation asks for nothing new.
      await client.request('PATCH', `${podsOf('leaving')}/held`, {body: {metadata: {labels: {edited: 'yes'}}}, contentType: mergePatch})
      await client.request('PATCH', `${podsOf('leaving')}/held`, {body: {metadata: {annotations: annotation('lab-serial,open')}}, contentType: mergePatch})
      const again = await refusal(() => client.request('PATCH', `${podsOf('leaving')}/held`, {body: {metadata: {annotations: {'devices.nfdctl.io/sidecar': 'lab-serial'}}}, contentType: mergePatch}))
      expect(again.serverMessage).to.contain('lab-serial cannot be taken by pod annotation in namespace leaving')
    })

    it('does not judge pods without a devices.nfdctl.io/ annotation, resource limits, or classes that do not exist', async () => {
      const untouched = {'example.com/note': 'closed'}
      const created = await client.request<{metadata: {annotations: Json}; spec: {containers: Array<{resources: Json}>}}>('POST', podsOf('elsewhere'), {
        body: pod('limits-only', {annotations: untouched, limits: {'devices.nfdctl.io/closed': '1'}}),
      })
      expect(created.metadata.annotations).to.deep.equal(untouched)
      expect(created.spec.containers[0].resources).to.deep.equal({limits: {'devices.nfdctl.io/closed': '1'}, requests: {'devices.nfdctl.io/closed': '1'}})
      // Nothing to grant: the agent gives nothing for an unknown class, and refusing would need every class named.
      await client.request('POST', podsOf('elsewhere'), {body: pod('unknown', {annotations: annotation('no-such-class')})})
    })

    describe('evaluates namespaceSelector as the agent does (matchesLabelSelector), operator by operator', function () {
      const selectors: Array<[string, LabelSelector]> = [
        ['everything', {}],
        ['match-labels', {matchLabels: {team: 'lab'}}],
        ['in', {matchExpressions: [{key: 'env', operator: 'In', values: ['dev', 'test']}]}],
        ['not-in', {matchExpressions: [{key: 'env', operator: 'NotIn', values: ['prod']}]}],
        ['exists', {matchExpressions: [{key: 'team', operator: 'Exists'}]}],
        ['does-not-exist', {matchExpressions: [{key: 'env', operator: 'DoesNotExist'}]}],
        ['labels-and-expressions', {matchExpressions: [{key: 'env', operator: 'NotIn', values: ['prod']}], matchLabels: {team: 'lab'}}],
        ['by-name', {matchLabels: {'kubernetes.io/metadata.name': 'sel-bare'}}],
      ]
      const namespaces: Record<string, Record<string, string>> = {
        'sel-bare': {},
        'sel-dev': {env: 'dev', team: 'lab'},
        'sel-prod': {env: 'prod'},
        'sel-team-prod': {env: 'prod', team: 'lab'},
      }
      const labelsOf = new Map<string, Record<string, string>>()

      before(async function () {
        this.timeout(60_000)
        for (const [name, labels] of Object.entries(namespaces)) {
          await createNamespace(name, labels)
          // As stored: the API server adds kubernetes.io/metadata.name.
          labelsOf.set(name, (await client.request<{metadata: {labels: Record<string, string>}}>('GET', `/api/v1/namespaces/${name}`)).metadata.labels)
        }
        for (const [name, selector] of selectors) await client.request('POST', deviceClassesPath, {body: deviceClass(`sel-${name}`, selector)})
        await annotationPolicyCaughtUp()
      })

      for (const [name, selector] of selectors) {
        it(`sel-${name}: ${JSON.stringify(selector)}`, async () => {
          const verdicts: Record<string, boolean> = {}
          const expected: Record<string, boolean> = {}
          for (const namespace of Object.keys(namespaces)) {
            expected[namespace] = matchesLabelSelector(selector, labelsOf.get(namespace)!)
            try {
              await client.request('POST', podsOf(namespace), {body: pod('table', {annotations: annotation(`sel-${name}`)}), query: {dryRun: 'All'}})
              verdicts[namespace] = true
            } catch (error) {
              if (!refusedBy(error, annotationPolicy)) throw error
              expect(error.serverMessage).to.contain(`sel-${name} cannot be taken by pod annotation in namespace ${namespace}`)
              verdicts[namespace] = false
            }
          }
          expect(verdicts).to.deep.equal(expected)
        })
      }

      it('the table holds both verdicts for every namespace (no case passes vacuously)', () => {
        for (const namespace of Object.keys(namespaces)) {
          const results = new Set(selectors.map(([, selector]) => matchesLabelSelector(selector, labelsOf.get(namespace)!)))
          expect([...results].sort(), namespace).to.deep.equal([false, true])
        }
      })
    })
  })

  describe('ResourceQuota on requests.devices.nfdctl.io/<class>: the device-plugin path, capped per namespace', function () {
    it('admits one pod with the limit devices.nfdctl.io/<class>: 1 and refuses a second', async function () {
      this.timeout(60_000)
      const resource = 'requests.devices.nfdctl.io/lab-serial'
      await createNamespace('quota')
      const quotas = '/api/v1/namespaces/quota/resourcequotas'
      await client.request('POST', quotas, {body: {apiVersion: 'v1', kind: 'ResourceQuota', metadata: {name: 'devices'}, spec: {hard: {[resource]: '1'}}}})
      // kube-controller-manager's quota controller writes the status in a cluster; quota admission enforces
      // only what status.hard lists, and counts on from status.used.
      await client.request('PATCH', `${quotas}/devices/status`, {body: {status: {hard: {[resource]: '1'}, used: {[resource]: '0'}}}, contentType: mergePatch})
      const limits = (n: string): Record<string, string> => ({'devices.nfdctl.io/lab-serial': n})
      await untilRefused(
        "quota admission to see the quota's status",
        () => client.request('POST', podsOf('quota'), {body: pod('too-many', {limits: limits('2')}), query: {dryRun: 'All'}}),
        (error) => error instanceof KubeApiError && error.serverMessage.includes('exceeded quota: devices'),
      )

      await client.request('POST', podsOf('quota'), {body: pod('first', {limits: limits('1')})})
      const error = await refusal(() => client.request('POST', podsOf('quota'), {body: pod('second', {limits: limits('1')})}))
      expect(error.code).to.equal(403)
      expect(error.serverMessage).to.contain(`exceeded quota: devices, requested: ${resource}=1, used: ${resource}=1, limited: ${resource}=1`)
      const quota = await client.request<{status: {used: Json}}>('GET', `${quotas}/devices`)
      expect(quota.status.used).to.deep.equal({[resource]: '1'})
    })
  })

  describe(`ValidatingAdmissionPolicy ${statusPolicy}: an agent writes only its own node's status entry`, function () {
    const className = 'status-test'
    const namespace = 'nfdctl-system'
    const theirs = {devices: [{devName: 'ttyUSB0', id: 'c188:0', major: 188, minor: 0}], node: 'node-b'}
    let agent: KubeClient
    let unscheduled: KubeClient

    /** node-b's entry as the tests expect it (written as node-b's agent would). */
    async function restoreTheirs(): Promise<void> {
      await client.request('PATCH', classStatusPath(className), {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: className}, status: {nodes: [theirs]}},
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: 'nfdctl-agent-node-b', force: true},
      })
    }

    async function nodesOfClass(): Promise<Json[]> {
      return (await client.request<{status?: {nodes?: Json[]}}>('GET', `${deviceClassesPath}/${className}`)).status?.nodes ?? []
    }

    before(async function () {
      this.timeout(60_000)
      for (const node of ['node-a', 'node-b']) await client.request('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {name: node}}})
      await client.request('POST', podsOf(namespace), {body: pod('agent-a', {nodeName: 'node-a', serviceAccountName: 'nfdctl-agent'})})
      await client.request('POST', podsOf(namespace), {body: pod('agent-unscheduled', {serviceAccountName: 'nfdctl-agent'})})
      agent = await clientBoundTo('agent-a')
      unscheduled = await clientBoundTo('agent-unscheduled')

      await client.request('POST', deviceClassesPath, {body: deviceClass(className)})
      // node-b's agent wrote its entry (as the status writer does: server-side apply, a field manager per node).
      await restoreTheirs()
      // In force once it refuses a token that names no node (a probe apart from the rules under test).
      await untilRefused(
        `ValidatingAdmissionPolicy ${statusPolicy} to refuse a token that names no node`,
        () => unscheduled.request('PATCH', classStatusPath(className), {body: {status: {nodes: []}}, contentType: mergePatch, query: {dryRun: 'All'}}),
        (error) => refusedBy(error, statusPolicy),
      )
    })

    after(function () {
      agent?.close()
      unscheduled?.close()
    })

    it('a token bound to a pod carries its node, authentication.kubernetes.io/node-name (TokenRequest, SelfSubjectReview)', async () => {
      const review = await agent.request<{status: {userInfo: {username: string; extra: Record<string, string[]>}}}>('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
        body: {apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview'},
      })
      expect(review.status.userInfo.username).to.equal('system:serviceaccount:nfdctl-system:nfdctl-agent')
      expect(review.status.userInfo.extra['authentication.kubernetes.io/node-name']).to.deep.equal(['node-a'])
    })

    it('the agent writes its own entry and the Valid condition through StatusWriter, and takes its entry back', async () => {
      const writer = new StatusWriter(agent, 'node-a')
      const device: Device = {
        devName: 'ttyACM0',
        devNode: '/dev/ttyACM0',
        devPath: '/devices/virtual/tty/ttyACM0',
        id: 'c166:0',
        kernelName: 'ttyACM0',
        major: 166,
        minor: 0,
        properties: {},
        subsystem: 'tty',
        type: 'char',
      }
      const entry = nodeClassStatus('node-a', [device], 1, 1)
      expect(await writer.write(new Map([[className, {condition: {generation: 1, message: 'ok', valid: true}, entry}]]))).to.deep.equal([className])
      const written = await nodesOfClass()
      expect(written.map((e) => e.node)).to.deep.equal(['node-b', 'node-a'])
      expect(written[0]).to.deep.equal(theirs)
      expect(written[1]).to.deep.include({devices: entry.devices, holders: 1, node: 'node-a', observedGeneration: 1})

      // A class that no longer applies to the node: an empty apply takes the entry back.
      expect(await writer.write(new Map())).to.deep.equal([className])
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it("two agents report a class; the one that forced the Valid condition's message last takes its entry back, and the other's entry and the condition stay", async () => {
      await client.request('POST', podsOf(namespace), {body: pod('agent-b', {nodeName: 'node-b', serviceAccountName: 'nfdctl-agent'})})
      const agentB = await clientBoundTo('agent-b')
      const a = new StatusWriter(agent, 'node-a')
      const b = new StatusWriter(agentB, 'node-b')
      try {
        await a.write(new Map([[className, {condition: {generation: 1, message: 'the spec is valid and in use on node node-a', valid: true}, entry: nodeClassStatus('node-a', [], 0, 1)}]]))
        await b.write(new Map([[className, {condition: {generation: 1, message: 'the spec is valid and in use on node node-b', valid: true}, entry: nodeClassStatus('node-b', [], 0, 1)}]]))
        // node-b's message won (force): an empty apply would release it, and the condition would have no message.
        expect(await b.write(new Map())).to.deep.equal([className])
        const after = await client.request<{status: {nodes: Json[]; conditions: Array<{type: string; message: string}>}}>('GET', `${deviceClassesPath}/${className}`)
        expect(after.status.nodes.map((e) => e.node)).to.deep.equal(['node-a'])
        expect(after.status.conditions.map((c) => c.type)).to.deep.equal(['Valid'])
        expect(await a.write(new Map())).to.deep.equal([className])
        expect(await nodesOfClass()).to.deep.equal([])
      } finally {
        agentB.close()
        await restoreTheirs()
      }
    })

    it('two agents say what the API server drops as class-wide conditions (admitted), at one time; the one whose view changes takes only its own say back', async function () {
      this.timeout(30_000)
      // Made by the test before; made here when run alone.
      await client.request('POST', podsOf(namespace), {body: pod('agent-b', {nodeName: 'node-b', serviceAccountName: 'nfdctl-agent'})}).catch(() => {})
      const agentB = await clientBoundTo('agent-b')
      const a = new StatusWriter(agent, 'node-a')
      const b = new StatusWriter(agentB, 'node-b')
      const valid = (node: string) => ({generation: 1, message: `the spec is valid and in use on node ${node}`, valid: true})
      const dropped = droppedFeatureConditions(className, {extendedResourceName: true, taints: false})
      type Status = {conditions: Array<{type: string; status: string; reason: string; lastTransitionTime: string}>}
      const conditions = async () => (await client.request<{status: Status}>('GET', `${deviceClassesPath}/${className}`)).status.conditions
      try {
        await a.write(new Map([[className, {condition: valid('node-a'), dropped, entry: nodeClassStatus('node-a', [], 0, 1)}]]))
        const first = (await conditions()).find((c) => c.type === 'LimitRequestsServed')
        expect(first).to.deep.include({reason: 'ExtendedResourceDropped', status: 'False'})
        // A second later: the time node-a wrote stays the condition's.
        await sleep(1100)
        await b.write(new Map([[className, {condition: valid('node-b'), dropped, entry: nodeClassStatus('node-b', [], 0, 1)}]]))
        expect((await conditions()).find((c) => c.type === 'LimitRequestsServed')?.lastTransitionTime).to.equal(first?.lastTransitionTime)
        // node-a's API server view changed (the gate turned on, node-a's agent restarted first): node-b still says it.
        await a.write(new Map([[className, {condition: valid('node-a'), entry: nodeClassStatus('node-a', [], 0, 1)}]]))
        expect((await conditions()).map((c) => c.type)).to.deep.equal(['Valid', 'LimitRequestsServed'])
        await b.write(new Map([[className, {condition: valid('node-b'), entry: nodeClassStatus('node-b', [], 0, 1)}]]))
        expect((await conditions()).map((c) => c.type)).to.deep.equal(['Valid'])
        await b.write(new Map())
        await a.write(new Map())
      } finally {
        agentB.close()
        await restoreTheirs()
      }
    })

    it('the agent lists a host-critical device it leaves out in its own entry (refused, reason HostCritical), and takes it back', async () => {
      const writer = new StatusWriter(agent, 'node-a')
      const disk: Device = {
        devName: 'vda',
        devNode: '/dev/vda',
        devPath: '/devices/pci0000:00/virtio1/block/vda',
        id: 'b254:0',
        kernelName: 'vda',
        major: 254,
        minor: 0,
        properties: {},
        subsystem: 'block',
        type: 'block',
      }
      const message = "/dev/vda backs the node's mount /; set spec.hostCritical: Allow in the class to serve it"
      const entry = nodeClassStatus('node-a', [], 0, 1, [{className, device: disk, message, reason: 'HostCritical'}])
      await writer.write(new Map([[className, {entry}]]))
      const written = (await nodesOfClass()).find((e) => e.node === 'node-a')
      expect(written?.refused).to.deep.equal([{devName: 'vda', id: 'b254:0', message, reason: 'HostCritical'}])
      await writer.write(new Map())
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it("refuses the agent applying, changing or removing another node's entry", async () => {
      const message = `the nfdctl agent of node node-a may write only its own entry of status.nodes in DeviceClass (devices.nfdctl.io) ${className}`
      // An agent that claims to be node-b's (its field manager and entry), with node-a's token.
      const impostor = new StatusWriter(agent, 'node-b')
      const applied = await refusal(() => impostor.write(new Map([[className, {entry: nodeClassStatus('node-b', [], 0)}]])))
      expect(applied.code).to.equal(403)
      expect(applied.serverMessage).to.contain(message)

      const changed = await refusal(() =>
        agent.request('PATCH', classStatusPath(className), {
          body: [{op: 'replace', path: '/status/nodes/0/devices', value: []}],
          contentType: 'application/json-patch+json',
        }),
      )
      expect(changed.serverMessage).to.contain(message)
      const removed = await refusal(() => agent.request('PATCH', classStatusPath(className), {body: {status: {nodes: []}}, contentType: mergePatch}))
      expect(removed.serverMessage).to.contain(message)
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it("refuses the agent's service account with a token that names no node", async () => {
      const writer = new StatusWriter(unscheduled, 'node-a')
      const error = await refusal(() => writer.write(new Map([[className, {entry: nodeClassStatus('node-a', [], 0)}]])))
      expect(error.serverMessage).to.contain("the nfdctl agent's credentials name no node")
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    // A client certificate's user has an extra (its credential ID) on this API server; an impersonated user has none.
    it("answers a request without user extras (the agent's name, impersonated) with its own message, not a CEL error", async () => {
      const impersonated = (await openCluster({kubeconfig: await impersonating(agentUser)}, {burst: 10, qps: 10})).client
      try {
        const error = await refusal(() => new StatusWriter(impersonated, 'node-a').write(new Map([[className, {entry: nodeClassStatus('node-a', [], 0)}]])))
        expect(error.code).to.equal(403)
        expect(error.serverMessage).to.contain(`ValidatingAdmissionPolicy '${statusPolicy}'`).and.contain("the nfdctl agent's credentials name no node").and.not.contain('no such key')
      } finally {
        impersonated.close()
      }
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it('does not judge other identities (an administrator may still edit any entry)', async () => {
      await client.request('PATCH', classStatusPath(className), {body: {status: {nodes: []}}, contentType: mergePatch})
      expect(await nodesOfClass()).to.deep.equal([])
    })
  })

  describe(`deploy/agent-dra: the DRA driver's role, narrowed by ValidatingAdmissionPolicies ${slicePolicy} and ${draClassPolicy}`, function () {
    const namespace = 'nfdctl-system'
    const slicesPath = '/apis/resource.k8s.io/v1/resourceslices'
    const draClassesPath = '/apis/resource.k8s.io/v1/deviceclasses'
    const claimsPath = '/apis/resource.k8s.io/v1/namespaces/claims/resourceclaims'
    const driver = 'devices.nfdctl.io'
    const log = sink()
    const logger = createLogger({format: 'json', level: 'warn', out: log})
    const controller = new AbortController()
    let agent: KubeClient
    let unscheduled: KubeClient

    const slice = (name: string, spec: Json): Json => ({
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceSlice',
      metadata: {name},
      spec: {devices: [], driver, pool: {generation: 1, name: typeof spec.nodeName === 'string' ? spec.nodeName : 'pool', resourceSliceCount: 1}, ...spec},
    })
    const device = (i: number): SliceDevice => ({attributes: {stableId: {string: `serial-${i}`}}, name: `serial-${i}`})
    /** A server-side apply, as the driver writes. */
    const apply = (as: KubeClient, path: string, body: Json): Promise<unknown> =>
      as.request('PATCH', path, {body, contentType: 'application/apply-patch+yaml', query: {fieldManager: 'nfdctl-agent', force: true}})
    /** The slices of `node`, as `[name, number of devices]`. */
    const slicesOf = async (node: string): Promise<Array<[string, number]>> =>
      (await client.request<{items: Array<{metadata: {name: string}; spec: {devices?: unknown[]}}>}>('GET', slicesPath, {query: {fieldSelector: `spec.nodeName=${node}`}})).items
        .map((s): [string, number] => [s.metadata.name, s.spec.devices?.length ?? 0])
        .sort(([a], [b]) => a.localeCompare(b))
    /** RBAC has not taken the role in yet (a refusal by the authorizer, not by a policy). */
    const notAuthorizedYet = (error: unknown): boolean => error instanceof KubeApiError && error.statusClass === 'Forbidden' && !error.serverMessage.includes('ValidatingAdmissionPolicy')

    before(async function () {
      this.timeout(60_000)
      const {docs, namespace: kustomized} = await readManifests('agent-dra', ['rbac.yaml', 'slice-policy.yaml', 'device-class-policy.yaml', 'claim-status-policy.yaml'])
      for (const {doc} of docs) {
        const {body, collection} = placeManifest(doc, kustomized)!
        await client.request('POST', collection, {body})
      }
      for (const node of ['dra-a', 'dra-b']) await client.request('POST', '/api/v1/nodes', {body: {apiVersion: 'v1', kind: 'Node', metadata: {name: node}}})
      await client.request('POST', podsOf(namespace), {body: pod('dra-agent-a', {nodeName: 'dra-a', serviceAccountName: 'nfdctl-agent'})})
      await client.request('POST', podsOf(namespace), {body: pod('dra-agent-unscheduled', {serviceAccountName: 'nfdctl-agent'})})
      agent = await clientBoundTo('dra-agent-a')
      unscheduled = await clientBoundTo('dra-agent-unscheduled')
      // Both in force once each refuses a probe apart from the rules under test.
      await untilRefused(
        `ValidatingAdmissionPolicy ${slicePolicy} to refuse a token that names no node`,
        () => unscheduled.request('POST', slicesPath, {body: slice('probe', {nodeName: 'dra-a'}), query: {dryRun: 'All'}}),
        (error) => refusedBy(error, slicePolicy),
        notAuthorizedYet,
      )
      await untilRefused(
        `ValidatingAdmissionPolicy ${draClassPolicy} to refuse a class of another name`,
        () => agent.request('POST', draClassesPath, {body: {apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: {name: 'probe'}, spec: {}}, query: {dryRun: 'All'}}),
        (error) => refusedBy(error, draClassPolicy),
        notAuthorizedYet,
      )
    })

    after(function () {
      controller.abort()
      agent?.close()
      unscheduled?.close()
    })

    it("the driver's SlicePublisher, on a token bound to a pod of node dra-a, publishes that node's pool, changes it and takes back a slice (list, watch, server-side apply, delete)", async () => {
      let errors = 0
      const publisher = new SlicePublisher({client: agent, logger, nodeName: 'dra-a', onError: () => errors++})
      try {
        await publisher.start(controller.signal).synced
        publisher.setDevices(Array.from({length: 130}, (_, i) => device(i)))
        await publisher.settled()
        expect(errors, log.text()).to.equal(0)
        expect(await slicesOf('dra-a')).to.deep.equal([
          ['dra-a-devices.nfdctl.io-0', 128],
          ['dra-a-devices.nfdctl.io-1', 2],
        ])
        publisher.setDevices([device(0)])
        await publisher.settled()
        expect(errors, log.text()).to.equal(0)
        expect(await slicesOf('dra-a')).to.deep.equal([['dra-a-devices.nfdctl.io-0', 1]])
      } finally {
        await publisher.stop()
      }
    })

    it("refuses the agent creating, changing or deleting another node's slice (server-side apply, patch, update, delete), one of no node, or another driver's", async () => {
      const theirs = 'dra-b-devices.nfdctl.io-0'
      // dra-b's slice, written by an administrator, whom the policy does not judge.
      await apply(client, `${slicesPath}/${theirs}`, slice(theirs, {nodeName: 'dra-b', pool: {generation: 1, name: 'dra-b', resourceSliceCount: 1}}))
      const stored = await client.request<Json & {metadata: Json}>('GET', `${slicesPath}/${theirs}`)
      const others = `the nfdctl agent of node dra-a may write only the ResourceSlices of its own node, not those of node dra-b`
      const attempts: Array<[string, () => Promise<unknown>]> = [
        ['a server-side apply that creates one', () => apply(agent, `${slicesPath}/dra-b-devices.nfdctl.io-1`, slice('dra-b-devices.nfdctl.io-1', {nodeName: 'dra-b'}))],
        [
          'a server-side apply that changes one',
          () => apply(agent, `${slicesPath}/${theirs}`, slice(theirs, {devices: [device(9)], nodeName: 'dra-b', pool: {generation: 2, name: 'dra-b', resourceSliceCount: 1}})),
        ],
        ['a merge patch', () => agent.request('PATCH', `${slicesPath}/${theirs}`, {body: {metadata: {labels: {taken: 'yes'}}}, contentType: mergePatch})],
        ['a delete', () => agent.request('DELETE', `${slicesPath}/${theirs}`)],
      ]
      for (const [what, attempt] of attempts) {
        const error = await refusal(attempt)
        expect(error.code, what).to.equal(403)
        expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${slicePolicy}'`).and.contain(others)
      }
      // No PUT at all: the role grants only what server-side apply needs, so RBAC refuses an update first.
      const updated = await refusal(() => agent.request('PUT', `${slicesPath}/${theirs}`, {body: {...stored, metadata: {...stored.metadata, labels: {taken: 'yes'}}}}))
      expect(updated.code).to.equal(403)
      expect(updated.serverMessage).to.contain('cannot update resource "resourceslices"').and.not.contain('ValidatingAdmissionPolicy')
      const everywhere = await refusal(() => apply(agent, `${slicesPath}/everywhere`, slice('everywhere', {allNodes: true})))
      expect(everywhere.serverMessage).to.contain('the nfdctl agent of node dra-a may write only the ResourceSlices of its own node, not a slice of no single node')
      const otherDriver = await refusal(() => apply(agent, `${slicesPath}/dra-a-gpu`, slice('dra-a-gpu', {driver: 'gpu.example.com', nodeName: 'dra-a'})))
      expect(otherDriver.serverMessage).to.contain('the nfdctl agent of node dra-a may write only the ResourceSlices of driver devices.nfdctl.io, not those of gpu.example.com')
      const otherPool = await refusal(() =>
        apply(agent, `${slicesPath}/dra-a-devices.nfdctl.io-7`, slice('dra-a-devices.nfdctl.io-7', {nodeName: 'dra-a', pool: {generation: 9, name: 'dra-b', resourceSliceCount: 1}})),
      )
      expect(otherPool.serverMessage).to.contain('the nfdctl agent of node dra-a may write only its own pool (named after the node), not pool dra-b')
      const noNode = await refusal(() => apply(unscheduled, `${slicesPath}/dra-a-devices.nfdctl.io-9`, slice('dra-a-devices.nfdctl.io-9', {nodeName: 'dra-a'})))
      expect(noNode.serverMessage).to.contain("the nfdctl agent's credentials name no node")
      expect(await client.request('GET', `${slicesPath}/${theirs}`)).to.deep.equal(stored)
      expect(await slicesOf('dra-a'), "the agent's own slice, as its publisher left it").to.deep.equal([['dra-a-devices.nfdctl.io-0', 1]])
      await client.request('DELETE', `${slicesPath}/${theirs}`)
    })

    it("the driver's DraDeviceClasses applies <class>.devices.nfdctl.io for a DRA class, owned by that class, and deletes it when the class goes", async () => {
      const created = await client.request<{metadata: {uid: string}}>('POST', deviceClassesPath, {body: deviceClassManifest('dra-serial', {allocation: 'DRA'})})
      const {uid} = created.metadata
      let errors = 0
      const classes = new DraDeviceClasses({client: agent, logger, onError: () => errors++})
      await classes.sync([{...heldClass('dra-serial', {allocation: 'DRA'}), metadata: {name: 'dra-serial', uid}}])
      expect(errors, log.text()).to.equal(0)
      const made = await client.request<{metadata: {ownerReferences: Json[]}}>('GET', `${draClassesPath}/dra-serial.devices.nfdctl.io`)
      expect(made.metadata.ownerReferences).to.deep.equal([{apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', name: 'dra-serial', uid}])
      await classes.sync([])
      expect(errors, log.text()).to.equal(0)
      const gone = await refusal(() => client.request('GET', `${draClassesPath}/dra-serial.devices.nfdctl.io`))
      expect(gone.code).to.equal(404)
    })

    it("refuses the agent creating, changing or deleting a resource.k8s.io DeviceClass outside its driver's names", async () => {
      const gpu = {apiVersion: 'resource.k8s.io/v1', kind: 'DeviceClass', metadata: {name: 'gpu.example.com'}, spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}}
      await client.request('POST', draClassesPath, {body: gpu})
      const message = (name: string): string => `the nfdctl agent may write only the resource.k8s.io DeviceClasses of driver devices.nfdctl.io, named <class>.devices.nfdctl.io, not ${name}`
      const attempts: Array<[string, string, () => Promise<unknown>]> = [
        ['a server-side apply that changes one', 'gpu.example.com', () => apply(agent, `${draClassesPath}/gpu.example.com`, {...gpu, spec: {selectors: [{cel: {expression: 'true'}}]}})],
        ['a delete', 'gpu.example.com', () => agent.request('DELETE', `${draClassesPath}/gpu.example.com`)],
        ['a server-side apply that creates one', 'serial', () => apply(agent, `${draClassesPath}/serial`, {...gpu, metadata: {name: 'serial'}})],
      ]
      for (const [what, name, attempt] of attempts) {
        const error = await refusal(attempt)
        expect(error.code, what).to.equal(403)
        expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${draClassPolicy}'`).and.contain(message(name))
      }
      const kept = await client.request<{spec: Json}>('GET', `${draClassesPath}/gpu.example.com`)
      expect(kept.spec).to.deep.equal(gpu.spec)
    })

    describe(`the spec of <class>.devices.nfdctl.io is pinned to the one DraDeviceClasses generates (${draClassPolicy})`, function () {
      /** The devices.nfdctl.io DRA class `name`, created by an administrator, as the agent holds it (with its UID). */
      const draClass = async (name: string): Promise<ReturnType<typeof heldClass>> => {
        const created = await client.request<{metadata: {uid: string}}>('POST', deviceClassesPath, {body: deviceClassManifest(name, {allocation: 'DRA'})})
        return {...heldClass(name, {allocation: 'DRA'}), metadata: {name, uid: created.metadata.uid}}
      }
      let readable: ReturnType<typeof heldClass>
      let dotted: ReturnType<typeof heldClass>

      before(async function () {
        readable = await draClass('dra-pinned')
        // A dotted name: its attribute is cls_<prefix>_<hash>, which the policy checks but for the hash.
        dotted = await draClass('dra.pinned')
      })

      it('lets DraDeviceClasses apply both, the readable attribute and the hashed one, with the extendedResourceName of their class, as it generates them', async () => {
        let errors = 0
        const classes = new DraDeviceClasses({client: agent, complete: () => false, logger, onError: () => errors++})
        await classes.sync([readable, dotted])
        expect(errors, log.text()).to.equal(0)
        for (const c of [readable, dotted]) {
          const made = await client.request<{spec: Json}>('GET', `${draClassesPath}/${c.metadata.name}.devices.nfdctl.io`)
          // An API server with DRAExtendedResource off (1.34, 1.35 by default) drops the field before it stores the class.
          const {extendedResourceName, ...rest} = draDeviceClassOf(c).spec
          expect(made.spec, c.metadata.name).to.deep.equal(clusterGates.extendedResource ? {...rest, extendedResourceName} : rest)
        }
      })

      it("refuses another selector (another class's attribute, a wider one, a second one), spec.config, another resource's extendedResourceName, another class label", async () => {
        const made = draDeviceClassOf(readable) as unknown as Json & {metadata: Json; spec: Json}
        const name = 'dra-pinned.devices.nfdctl.io'
        const selector = (expression: string): Json => ({cel: {expression}})
        const onlyItsSelector = `may give resource.k8s.io DeviceClass ${name} only the selector it generates for class dra-pinned`
        const onlyItsResource = `may give resource.k8s.io DeviceClass ${name} only the extendedResourceName devices.nfdctl.io/dra-pinned`
        const attempts: Array<[string, Json, string]> = [
          ["another class's attribute", {...made, spec: {selectors: [selector(classSelector('victim'))]}}, onlyItsSelector],
          ['every device of the driver', {...made, spec: {selectors: [selector('device.driver == "devices.nfdctl.io"')]}}, onlyItsSelector],
          ['a second selector', {...made, spec: {selectors: [...(made.spec.selectors as Json[]), selector('true')]}}, onlyItsSelector],
          [
            'spec.config',
            {...made, spec: {...made.spec, config: [{opaque: {driver: 'devices.nfdctl.io', parameters: {mode: 'raw'}}}]}},
            `may not set spec.config of resource.k8s.io DeviceClass ${name}`,
          ],
          // Where the API server drops extendedResourceName it is gone before admission: nothing for the policy to refuse.
          ...(clusterGates.extendedResource
            ? ([
                ["another class's extendedResourceName", {...made, spec: {...made.spec, extendedResourceName: 'devices.nfdctl.io/victim'}}, onlyItsResource],
                ["another domain's extendedResourceName", {...made, spec: {...made.spec, extendedResourceName: 'example.com/serial'}}, onlyItsResource],
              ] as Array<[string, Json, string]>)
            : []),
          ['another class label', {...made, metadata: {...made.metadata, labels: {...(made.metadata.labels as Json), 'devices.nfdctl.io/class': 'victim'}}}, 'devices.nfdctl.io/class=dra-pinned'],
          [
            "a dotted class given another prefix's hashed attribute",
            {...(draDeviceClassOf(dotted) as unknown as Json), spec: {selectors: [selector(classSelector('other.serial'))]}},
            'only the selector it generates for class dra.pinned',
          ],
        ]
        for (const [what, body, says] of attempts) {
          const path = `${draClassesPath}/${(body.metadata as {name: string}).name}`
          const error = await refusal(() => apply(agent, path, body))
          expect(error.code, what).to.equal(403)
          expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${draClassPolicy}'`).and.contain(says)
        }
        const {extendedResourceName, ...kept} = made.spec
        expect((await client.request<{spec: Json}>('GET', `${draClassesPath}/${name}`)).spec).to.deep.equal(clusterGates.extendedResource ? {...kept, extendedResourceName} : kept)
      })
    })

    describe("a claim's status.devices: resourceclaims/driver associated-node:patch only (its own node's claims, no arbitrary-node)", function () {
      const uids: Record<string, string> = {}
      const entry = (node: string): ClaimDeviceStatus => ({
        conditions: [{lastTransitionTime: '2026-01-01T00:00:00Z', message: 'present as /dev/ttyUSB0', reason: 'DevicePresent', status: 'True', type: 'Ready'}],
        data: {devNode: '/dev/ttyUSB0', kernelName: 'ttyUSB0'},
        device: 'serial-0',
        driver,
        pool: node,
      })
      const devicesOf = async (name: string): Promise<Json[]> => (await client.request<{status: {devices?: Json[]}}>('GET', `${claimsPath}/${name}`)).status.devices ?? []

      before(async function () {
        this.timeout(30_000)
        await createNamespace('claims')
        // A claim the scheduler allocated on each node (an administrator writes the allocation here).
        for (const node of ['dra-a', 'dra-b']) {
          const name = `on-${node}`
          const created = await client.request<{metadata: {uid: string}}>('POST', claimsPath, {
            body: {
              apiVersion: 'resource.k8s.io/v1',
              kind: 'ResourceClaim',
              metadata: {name},
              spec: {devices: {requests: [{exactly: {deviceClassName: 'dra-serial.devices.nfdctl.io'}, name: 'serial'}]}},
            },
          })
          uids[name] = created.metadata.uid
          await client.request('PATCH', `${claimsPath}/${name}/status`, {
            body: {
              status: {
                allocation: {
                  devices: {results: [{device: 'serial-0', driver, pool: node, request: 'serial'}]},
                  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: 'metadata.name', operator: 'In', values: [node]}]}]},
                },
              },
            },
            contentType: mergePatch,
          })
        }
      })

      it("the driver's ClaimStatusWriter writes and takes back its entry of a claim allocated on its node", async () => {
        // What NodePrepareResources reads first.
        const read = await agent.request<{status: {allocation: Json}}>('GET', `${claimsPath}/on-dra-a`)
        expect(read.status.allocation).to.have.property('nodeSelector')
        let errors = 0
        const writer = new ClaimStatusWriter(
          agent,
          'dra-a',
          logger,
          () => errors++,
          () => {},
        )
        await writer.write({name: 'on-dra-a', namespace: 'claims', uid: uids['on-dra-a']}, [entry('dra-a')])
        expect(errors, log.text()).to.equal(0)
        expect(await devicesOf('on-dra-a')).to.deep.equal([entry('dra-a')])
        await writer.write({name: 'on-dra-a', namespace: 'claims', uid: uids['on-dra-a']}, [])
        expect(errors, log.text()).to.equal(0)
        expect(await devicesOf('on-dra-a')).to.deep.equal([])
      })

      // docs/security.md, "What RBAC cannot narrow": get reaches every claim, list and watch none.
      it("reads another node's claim by name (RBAC cannot narrow get), and is refused a list or watch of claims", async () => {
        const read = await agent.request<{status: {allocation: {devices: {results: Array<{pool: string}>}}}}>('GET', `${claimsPath}/on-dra-b`)
        expect(read.status.allocation.devices.results.map((r) => r.pool)).to.deep.equal(['dra-b'])
        for (const [what, query] of [
          ['list', {}],
          ['watch', {watch: 'true'}],
        ] as Array<[string, Record<string, string>]>) {
          for (const path of [claimsPath, '/apis/resource.k8s.io/v1/resourceclaims']) {
            const error = await refusal(() => agent.request('GET', path, {query}))
            expect(error.code, `${what} ${path}`).to.equal(403)
          }
        }
      })

      it('refuses the entry of a claim allocated on another node, and any entry with a token that names no node', async () => {
        const write = (as: KubeClient, name: string, node: string): Promise<unknown> =>
          as.request('PATCH', `${claimsPath}/${name}/status`, {
            body: {apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: {name, namespace: 'claims', uid: uids[name]}, status: {devices: [entry(node)]}},
            contentType: 'application/apply-patch+yaml',
            query: {fieldManager: 'nfdctl-dra-dra-a', force: true},
          })
        // From 1.36 the API server refuses it (DRAResourceClaimGranularStatusAuthorization); before, the policy does,
        // once in force (a dry run says when).
        if (kubeMinor < 36) {
          await untilRefused(
            `${claimPolicy} in force`,
            () => agent.request('PATCH', `${claimsPath}/on-dra-b/status`, {body: {status: {devices: [entry('dra-b')]}}, contentType: mergePatch, query: {dryRun: 'All'}}),
            (error) => refusedBy(error, claimPolicy),
          )
        }
        const refused = kubeMinor >= 36 ? 'changing status.devices requires resource="resourceclaims/driver", verb="[arbitrary-node:patch]" permission' : `ValidatingAdmissionPolicy '${claimPolicy}'`
        for (const [what, attempt] of [
          ["node dra-a's agent, dra-b's claim", () => write(agent, 'on-dra-b', 'dra-b')],
          ['a token that names no node, a claim of dra-a', () => write(unscheduled, 'on-dra-a', 'dra-a')],
        ] as Array<[string, () => Promise<unknown>]>) {
          const error = await refusal(attempt)
          expect(error.serverMessage, what).to.contain(refused)
        }
        expect(await devicesOf('on-dra-b')).to.deep.equal([])
        expect(await devicesOf('on-dra-a')).to.deep.equal([])
      })

      /**
       * Kubernetes 1.34 and 1.35 have neither check (resourceclaims/driver for status.devices, resourceclaims/binding
       * for allocation and reservedFor; both came with 1.36's DRAResourceClaimGranularStatusAuthorization): there,
       * resourceclaims/status patch is all a writer needs. Granting the agent both synthetic permissions in full
       * makes this 1.37 API server answer as those do, so that only the policy stands between the agent and
       * every claim. It uses nothing newer than 1.34 (resource.k8s.io/v1, the token's node-name extra).
       */
      describe(`as on Kubernetes 1.34 and 1.35 (no per-driver or binding check): ValidatingAdmissionPolicy ${claimPolicy}`, function () {
        const rbac = '/apis/rbac.authorization.k8s.io/v1'
        const olderServer = 'nfdctl-test-as-before-1-36'
        const gpu = {device: 'gpu-0', driver: 'gpu.example.com', pool: 'dra-a'}
        const gpuEntry = {...gpu, conditions: [{lastTransitionTime: '2026-01-01T00:00:00Z', message: 'ok', reason: 'Ok', status: 'True', type: 'Ready'}]}
        let impersonated: KubeClient
        /** A server-side apply of `status`, as the agent of node dra-a writes. */
        const applyStatus = (as: KubeClient, name: string, status: Json): Promise<unknown> =>
          as.request('PATCH', `${claimsPath}/${name}/status`, {
            body: {apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: {name, namespace: 'claims'}, status},
            contentType: 'application/apply-patch+yaml',
            query: {fieldManager: 'nfdctl-dra-dra-a', force: true},
          })
        const claim = async (name: string): Promise<Json & {status: Json}> => client.request('GET', `${claimsPath}/${name}`)

        before(async function () {
          this.timeout(60_000)
          await client.request('POST', `${rbac}/clusterroles`, {
            body: {
              apiVersion: 'rbac.authorization.k8s.io/v1',
              kind: 'ClusterRole',
              metadata: {name: olderServer},
              rules: [
                {apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/driver'], verbs: ['arbitrary-node:patch', 'associated-node:patch']},
                {apiGroups: ['resource.k8s.io'], resources: ['resourceclaims/binding'], verbs: ['patch']},
              ],
            },
          })
          await client.request('POST', `${rbac}/clusterrolebindings`, {
            body: {
              apiVersion: 'rbac.authorization.k8s.io/v1',
              kind: 'ClusterRoleBinding',
              metadata: {name: olderServer},
              roleRef: {apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: olderServer},
              subjects: [{kind: 'ServiceAccount', name: 'nfdctl-agent', namespace}],
            },
          })
          // A claim of node dra-a with a device of another driver beside this driver's, whose entry its driver wrote.
          const created = await client.request<{metadata: {uid: string}}>('POST', claimsPath, {
            body: {
              apiVersion: 'resource.k8s.io/v1',
              kind: 'ResourceClaim',
              metadata: {name: 'two-drivers'},
              spec: {
                devices: {
                  requests: [
                    {exactly: {deviceClassName: 'dra-serial.devices.nfdctl.io'}, name: 'serial'},
                    {exactly: {deviceClassName: 'gpu.example.com'}, name: 'gpu'},
                  ],
                },
              },
            },
          })
          uids['two-drivers'] = created.metadata.uid
          await client.request('PATCH', `${claimsPath}/two-drivers/status`, {
            body: {
              status: {
                allocation: {
                  devices: {
                    results: [
                      {device: 'serial-0', driver, pool: 'dra-a', request: 'serial'},
                      {...gpu, request: 'gpu'},
                    ],
                  },
                  nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: 'metadata.name', operator: 'In', values: ['dra-a']}]}]},
                },
              },
            },
            contentType: mergePatch,
          })
          await client.request('PATCH', `${claimsPath}/two-drivers/status`, {body: {status: {devices: [gpuEntry]}}, contentType: mergePatch})
          impersonated = (await openCluster({kubeconfig: await impersonating(agentUser)}, {burst: 10, qps: 10})).client
          // In force, as an older server: node dra-a's agent writing dra-b's claim is refused by the policy, not the API server.
          await untilRefused(
            `the API server to let the agent past its own checks, and ${claimPolicy} to refuse a claim of another node`,
            () => agent.request('PATCH', `${claimsPath}/on-dra-b/status`, {body: {status: {devices: [entry('dra-b')]}}, contentType: mergePatch, query: {dryRun: 'All'}}),
            (error) => refusedBy(error, claimPolicy),
            (error) => error instanceof KubeApiError && error.serverMessage.includes('requires resource="resourceclaims/driver"'),
          )
        })

        after(async function () {
          impersonated?.close()
          await client.request('DELETE', `${rbac}/clusterrolebindings/${olderServer}`)
          await client.request('DELETE', `${rbac}/clusterroles/${olderServer}`)
        })

        it("refuses node dra-a's agent the status of a claim allocated on node dra-b (server-side apply, merge patch, the entry removed)", async () => {
          await client.request('PATCH', `${claimsPath}/on-dra-b/status`, {body: {status: {devices: [entry('dra-b')]}}, contentType: mergePatch})
          const message = 'the nfdctl agent of node dra-a may write the status only of ResourceClaims allocated on its node, not of claims/on-dra-b, allocated on node dra-b'
          for (const [what, attempt] of [
            ['a server-side apply', () => applyStatus(agent, 'on-dra-b', {devices: [{...entry('dra-b'), data: {devNode: '/dev/mem'}}]})],
            ['a merge patch', () => agent.request('PATCH', `${claimsPath}/on-dra-b/status`, {body: {status: {devices: []}}, contentType: mergePatch})],
          ] as Array<[string, () => Promise<unknown>]>) {
            const error = await refusal(attempt)
            expect(error.code, what).to.equal(403)
            expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${claimPolicy}'`).and.contain(message)
          }
          expect(await devicesOf('on-dra-b')).to.deep.equal([entry('dra-b')])
        })

        it("refuses the agent changing allocation or reservedFor of its own node's claim", async () => {
          const before = await claim('on-dra-a')
          const message = 'the nfdctl agent of node dra-a may not change status.allocation or status.reservedFor of ResourceClaim claims/on-dra-a'
          const reserved = {resource: 'pods', name: 'intruder', uid: '6f0e1d2c-0000-4000-8000-000000000001'}
          for (const [what, attempt] of [
            ['reservedFor given a pod', () => agent.request('PATCH', `${claimsPath}/on-dra-a/status`, {body: {status: {reservedFor: [reserved]}}, contentType: mergePatch})],
            ['the allocation taken away', () => agent.request('PATCH', `${claimsPath}/on-dra-a/status`, {body: {status: {allocation: null}}, contentType: mergePatch})],
          ] as Array<[string, () => Promise<unknown>]>) {
            const error = await refusal(attempt)
            expect(error.code, what).to.equal(403)
            expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${claimPolicy}'`).and.contain(message)
          }
          expect((await claim('on-dra-a')).status).to.deep.equal(before.status)
        })

        it("refuses the agent another driver's entry (changed or removed), and lets its own through beside it (ClaimStatusWriter)", async () => {
          const message = 'the nfdctl agent of node dra-a may write only the status.devices entries of driver devices.nfdctl.io and pool dra-a in ResourceClaim claims/two-drivers'
          for (const [what, attempt] of [
            ['changed', () => applyStatus(agent, 'two-drivers', {devices: [{...gpuEntry, data: {stolen: true}}]})],
            ['removed', () => agent.request('PATCH', `${claimsPath}/two-drivers/status`, {body: {status: {devices: []}}, contentType: mergePatch})],
          ] as Array<[string, () => Promise<unknown>]>) {
            const error = await refusal(attempt)
            expect(error.code, what).to.equal(403)
            expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${claimPolicy}'`).and.contain(message)
          }
          let errors = 0
          const writer = new ClaimStatusWriter(
            agent,
            'dra-a',
            logger,
            () => errors++,
            () => {},
          )
          await writer.write({name: 'two-drivers', namespace: 'claims', uid: uids['two-drivers']}, [entry('dra-a')])
          expect(errors, log.text()).to.equal(0)
          expect(await devicesOf('two-drivers')).to.deep.equal([gpuEntry, entry('dra-a')])
          await writer.write({name: 'two-drivers', namespace: 'claims', uid: uids['two-drivers']}, [])
          expect(errors, log.text()).to.equal(0)
          expect(await devicesOf('two-drivers')).to.deep.equal([gpuEntry])
        })

        it("lets through a write that changes nothing: the agent's empty apply to a claim no longer allocated (an unprepare after deallocation)", async () => {
          await client.request('POST', claimsPath, {
            body: {
              apiVersion: 'resource.k8s.io/v1',
              kind: 'ResourceClaim',
              metadata: {name: 'deallocated'},
              spec: {devices: {requests: [{exactly: {deviceClassName: 'dra-serial.devices.nfdctl.io'}, name: 'serial'}]}},
            },
          })
          await applyStatus(agent, 'deallocated', {devices: []})
          expect((await claim('deallocated')).status ?? {}).to.not.have.property('allocation')
        })

        it("refuses a token that names no node, and a user without extras in the agent's name, with its own message", async () => {
          for (const [what, as] of [
            ['a token of an unscheduled pod', unscheduled],
            ["the agent's name impersonated, without extras", impersonated],
          ] as Array<[string, KubeClient]>) {
            const error = await refusal(() => applyStatus(as, 'on-dra-a', {devices: [entry('dra-a')]}))
            expect(error.code, what).to.equal(403)
            expect(error.serverMessage, what).to.contain(`ValidatingAdmissionPolicy '${claimPolicy}'`).and.contain("the nfdctl agent's credentials name no node").and.not.contain('no such key')
          }
          // The slice policy answers such a user with its own message as well.
          const slice = await refusal(() =>
            apply(impersonated, `${slicesPath}/dra-a-devices.nfdctl.io-5`, {
              apiVersion: 'resource.k8s.io/v1',
              kind: 'ResourceSlice',
              metadata: {name: 'dra-a-devices.nfdctl.io-5'},
              spec: {devices: [], driver, nodeName: 'dra-a', pool: {generation: 1, name: 'dra-a', resourceSliceCount: 1}},
            }),
          )
          expect(slice.serverMessage).to.contain(`ValidatingAdmissionPolicy '${slicePolicy}'`).and.contain("the nfdctl agent's credentials name no node")
          expect(await devicesOf('on-dra-a')).to.deep.equal([])
        })
      })
    })
  })
})
