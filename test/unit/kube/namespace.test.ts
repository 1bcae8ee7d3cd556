import {expect} from 'chai'
import {mkdirSync, mkdtempSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

import {ownNamespace} from '../../../src/lib/kube/namespace.js'

describe('ownNamespace (the --leader-elect-namespace default)', () => {
  let inPod: string
  let outside: string

  before(() => {
    const root = mkdtempSync(join(tmpdir(), 'nfdctl-ns-'))
    inPod = join(root, 'pod')
    outside = join(root, 'laptop')
    mkdirSync(join(inPod, 'var/run/secrets/kubernetes.io/serviceaccount'), {recursive: true})
    writeFileSync(join(inPod, 'var/run/secrets/kubernetes.io/serviceaccount/namespace'), 'from-file\n')
    mkdirSync(outside)
  })

  after(() => rmSync(join(inPod, '..'), {force: true, recursive: true}))

  const cases = [
    {env: {POD_NAMESPACE: 'from-env'}, expected: 'from-env', name: '$POD_NAMESPACE first', root: () => inPod},
    {env: {}, expected: 'from-file', name: 'then the service-account namespace file', root: () => inPod},
    {env: {}, expected: 'from-context', name: "then the kubeconfig context's namespace, outside a pod", root: () => outside},
    {context: undefined, env: {}, expected: 'default', name: 'else default', root: () => outside},
  ]
  for (const c of cases) {
    it(c.name, () => {
      expect(ownNamespace(c.env, c.root(), 'context' in c ? c.context : 'from-context')).to.equal(c.expected)
    })
  }
})
