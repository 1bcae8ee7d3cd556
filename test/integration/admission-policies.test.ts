import {expect} from 'chai'

import {nodeClassStatus, StatusWriter} from '../../src/lib/agent/status-writer.js'
import {deviceClassesPath} from '../../src/lib/devices/cluster-classes.js'
import {matchesLabelSelector} from '../../src/lib/devices/label-selector.js'
import type {Device, LabelSelector} from '../../src/lib/devices/types.js'
import {KubeApiError} from '../../src/lib/kube/api-error.js'
import {openCluster} from '../../src/lib/kube/connect.js'
import type {KubeClient} from '../../src/lib/kube/kube-client.js'
import type {ControlPlane} from '../controlplane/control-plane.js'
import {startControlPlane} from '../support/cluster.js'
import {deviceClassManifest} from '../support/device-class.js'
import {placeManifest, readManifests} from '../support/manifests.js'
import {rejection} from '../support/thrown.js'
import {waitFor} from '../support/wait.js'

// deploy/agent's ValidatingAdmissionPolicies, and the ResourceQuota recipe for the device-plugin path, on a
// real kube-apiserver of their own: the annotation policy judges every pod that asks for a class, so it must
// not reach the pods of other suites on the shared control plane. No kubelet, scheduler or controller-manager
// runs here: pods stay Pending, which is all admission needs.

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

/** Waits until the dry-run `request` is refused as `expected` tells; it failing any other way fails the wait at once. */
async function untilRefused(what: string, request: () => Promise<unknown>, expected: (error: unknown) => boolean): Promise<void> {
  await waitFor(
    what,
    async () => {
      try {
        await request()
        return false
      } catch (error) {
        if (expected(error)) return true
        throw error
      }
    },
    {timeoutMs: 30_000},
  )
}

const annotationPolicy = 'nfdctl-device-annotation-access'
const statusPolicy = 'nfdctl-agent-own-node-status'

describe('deploy/agent admission policies and a device quota, on a real kube-apiserver', function () {
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

    /** A token for the agent's service account from the TokenRequest API, bound to `podName`, and a client using it. */
    async function clientBoundTo(podName: string): Promise<KubeClient> {
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
      await client.request('PATCH', classStatusPath(className), {
        body: {apiVersion: 'devices.nfdctl.io/v1alpha1', kind: 'DeviceClass', metadata: {name: className}, status: {nodes: [theirs]}},
        contentType: 'application/apply-patch+yaml',
        query: {fieldManager: 'nfdctl-agent-node-b', force: true},
      })
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
      const entry = nodeClassStatus('node-a', [device], [{container: 'main', namespace: 'lab', pod: 'admitted'}], 1)
      expect(await writer.write(new Map([[className, {condition: {generation: 1, message: 'ok', valid: true}, entry}]]))).to.deep.equal([className])
      const written = await nodesOfClass()
      expect(written.map((e) => e.node)).to.deep.equal(['node-b', 'node-a'])
      expect(written[0]).to.deep.equal(theirs)
      expect(written[1]).to.deep.include({containers: entry.containers, devices: entry.devices, node: 'node-a', observedGeneration: 1})

      // A class that no longer applies to the node: an empty apply takes the entry back.
      expect(await writer.write(new Map())).to.deep.equal([className])
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it("refuses the agent applying, changing or removing another node's entry", async () => {
      const message = `the nfdctl agent of node node-a may write only its own entry of status.nodes in DeviceClass (devices.nfdctl.io) ${className}`
      // An agent that claims to be node-b's (its field manager and entry), with node-a's token.
      const impostor = new StatusWriter(agent, 'node-b')
      const applied = await refusal(() => impostor.write(new Map([[className, {entry: nodeClassStatus('node-b', [], [])}]])))
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
      const error = await refusal(() => writer.write(new Map([[className, {entry: nodeClassStatus('node-a', [], [])}]])))
      expect(error.serverMessage).to.contain("the nfdctl agent's credentials name no node")
      expect(await nodesOfClass()).to.deep.equal([theirs])
    })

    it('does not judge other identities (an administrator may still edit any entry)', async () => {
      await client.request('PATCH', classStatusPath(className), {body: {status: {nodes: []}}, contentType: mergePatch})
      expect(await nodesOfClass()).to.deep.equal([])
    })
  })
})
