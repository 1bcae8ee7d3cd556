import {expect} from 'chai'

import {renderDoctor} from '../../../src/cli/render-doctor.js'
import type {DoctorReport} from '../../../src/lib/doctor/findings.js'
import {yaml} from '../../../src/lib/yaml.js'

const report: DoctorReport = {
  findings: [
    {check: 'API server version', feature: 'gc', found: 'API server v1.37.2', status: 'ok'},
    {check: 'DeviceClass extendedResourceName kept (dry run)', feature: 'DRA by limit', fix: 'turn on DRAExtendedResource', found: 'dropped', status: 'fail'},
    {check: 'ResourceSlice device taints kept (dry run)', feature: 'device taints', fix: 'turn on DRADeviceTaints', found: 'dropped', status: 'warn'},
  ],
  server: 'https://127.0.0.1:6443',
}

describe('doctor: rendering the findings', function () {
  it('table: one row per finding, then one line per problem with its fix, then the count', function () {
    expect(renderDoctor(report, 'table').split('\n')).to.deep.equal([
      'FEATURE         STATUS   CHECK                                             FOUND',
      'gc              OK       API server version                                API server v1.37.2',
      'DRA by limit    FAIL     DeviceClass extendedResourceName kept (dry run)   dropped',
      'device taints   WARN     ResourceSlice device taints kept (dry run)        dropped',
      '',
      'FAIL DRA by limit: turn on DRAExtendedResource',
      'WARN device taints: turn on DRADeviceTaints',
      '',
      'https://127.0.0.1:6443: 1 failed, 1 warnings, 1 ok',
    ])
  })

  it('json and yaml: the report itself', function () {
    expect(JSON.parse(renderDoctor(report, 'json'))).to.deep.equal(report)
    expect(yaml().parse(renderDoctor(report, 'yaml'))).to.deep.equal(report)
  })
})
