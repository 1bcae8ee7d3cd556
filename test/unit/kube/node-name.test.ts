import {expect} from 'chai'

import {ownNodeName} from '../../../src/lib/kube/node-name.js'

describe('ownNodeName (the --node-name default)', () => {
  const cases: Array<[string, string | undefined, Record<string, string>, string]> = [
    ['the given name first', 'flagged', {NODE_NAME: 'from-env'}, 'flagged'],
    ['then $NODE_NAME', undefined, {NODE_NAME: 'from-env'}, 'from-env'],
    ['then the hostname', undefined, {}, 'worker-7'],
    ['an empty $NODE_NAME is not set', undefined, {NODE_NAME: ''}, 'worker-7'],
  ]
  for (const [name, given, env, expected] of cases) {
    it(name, () => expect(ownNodeName(given, {env, hostname: 'worker-7'})).to.equal(expected))
  }
})
