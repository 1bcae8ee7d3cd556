import {expect} from 'chai'

import {createDraMetrics} from '../../../src/lib/dra/dra-metrics.js'
import {DraRegistration} from '../../../src/lib/dra/dra-registration.js'
import {Registry} from '../../../src/lib/observe/prometheus.js'
import {recordingLogger} from '../../support/recording-logger.js'
import {rejection} from '../../support/thrown.js'

describe('DraRegistration', function () {
  function registration() {
    const registry = new Registry()
    const log = recordingLogger()
    let republished = 0
    const made = new DraRegistration({logger: log, metrics: createDraMetrics(registry), onRegistered: () => void republished++})
    return {log, made, registry, republished: () => republished}
  }

  it("follows kubelet's word: ready once registered (said once), the slices written again on every registration", async function () {
    const {log, made, registry, republished} = registration()
    expect(made.status()).to.deep.equal({ready: false, reason: 'DRA driver devices.nfdctl.io: waiting for kubelet to register it'})
    made.registered(true, '')
    made.registered(true, '')
    expect(made.status()).to.deep.equal({ready: true, reason: 'DRA driver devices.nfdctl.io registered'})
    expect(republished()).to.equal(2)
    expect(log.lines.map((l) => l.msg)).to.deep.equal(['DRA driver devices.nfdctl.io: registered with kubelet'])
    made.registered(false, 'unsupported version')
    expect(made.status().reason).to.equal('DRA driver devices.nfdctl.io: kubelet refused the registration')
    expect(log.lines.at(-1)).to.deep.equal({fields: {err: 'unsupported version'}, level: 'warn', msg: 'DRA driver devices.nfdctl.io: kubelet refused the registration'})
    expect(await registry.getSingleMetricAsString('nfdctl_dra_registered')).to.match(/^nfdctl_dra_registered 0$/m)
  })

  it('each serve waits for kubelet again; a serve that fails is counted and named', async function () {
    const {made, registry} = registration()
    made.registered(true, '')
    let fail = false
    const socket = made.keptSocket({
      close: async () => {},
      isServing: async () => false,
      serve: async () => {
        if (fail) throw new Error('EEXIST: file already exists')
      },
    })
    await socket.serve()
    expect(made.status().ready).to.equal(false)
    fail = true
    expect((await rejection(socket.serve())).message).to.equal('cannot serve the DRA plugin: EEXIST: file already exists')
    expect(await registry.getSingleMetricAsString('nfdctl_dra_errors_total')).to.match(/kind="serve"} 1$/m)
  })
})
