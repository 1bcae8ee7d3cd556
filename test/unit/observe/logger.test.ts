import {expect} from 'chai'

import {createLogger, formatTextLine, logLevels} from '../../../src/lib/observe/logger.js'
import {sink} from '../../support/sink.js'

const t = Date.UTC(2026, 11, 2, 13, 0, 0, 0)
const iso = '2026-12-02T13:00:00.000Z'

describe('formatTextLine', () => {
  const cases: Array<[title: string, record: Record<string, unknown>, line: string]> = [
    ['message only', {level: 'info', msg: 'sweep done', time: t}, `${iso} INFO  sweep done`],
    ['epoch 0', {level: 'info', msg: 'm', time: 0}, '1970-01-01T00:00:00.000Z INFO  m'],
    ['milliseconds kept', {level: 'info', msg: 'm', time: t + 42}, '2026-12-02T13:00:00.042Z INFO  m'],
    ['time as a numeric string', {level: 'info', msg: 'm', time: String(t)}, `${iso} INFO  m`],
    ['debug', {level: 'debug', msg: 'm', time: t}, `${iso} DEBUG m`],
    ['warn padded to 5', {level: 'warn', msg: 'm', time: t}, `${iso} WARN  m`],
    ['error', {level: 'error', msg: 'm', time: t}, `${iso} ERROR m`],
    ['fatal', {level: 'fatal', msg: 'm', time: t}, `${iso} FATAL m`],
    ['plain string and number fields', {deleted: 3, kind: 'NodeFeature', level: 'info', msg: 'sweep done', time: t}, `${iso} INFO  sweep done deleted=3 kind=NodeFeature`],
    ['field order kept', {kind: 'NodeFeature', deleted: 3, level: 'info', msg: 'm', time: t}, `${iso} INFO  m kind=NodeFeature deleted=3`],
    ['string with a space is JSON-quoted', {err: 'connection refused', level: 'warn', msg: 'm', time: t}, `${iso} WARN  m err="connection refused"`],
    ['string with a newline is JSON-escaped', {err: 'a\nb', level: 'warn', msg: 'm', time: t}, `${iso} WARN  m err="a\\nb"`],
    ['string with a tab is JSON-escaped', {err: 'a\tb', level: 'warn', msg: 'm', time: t}, `${iso} WARN  m err="a\\tb"`],
    ['string without whitespace is bare', {uid: 'abc-123/x:y', level: 'info', msg: 'm', time: t}, `${iso} INFO  m uid=abc-123/x:y`],
    ['booleans', {dryRun: true, force: false, level: 'info', msg: 'm', time: t}, `${iso} INFO  m dryRun=true force=false`],
    ['null', {node: null, level: 'info', msg: 'm', time: t}, `${iso} INFO  m node=null`],
    ['zero', {failed: 0, level: 'info', msg: 'm', time: t}, `${iso} INFO  m failed=0`],
    ['array', {nodes: ['n1', 'n2'], level: 'info', msg: 'm', time: t}, `${iso} INFO  m nodes=["n1","n2"]`],
    ['object', {code: {reason: 'Gone', status: 410}, level: 'info', msg: 'm', time: t}, `${iso} INFO  m code={"reason":"Gone","status":410}`],
    ['pid and hostname dropped', {hostname: 'box', kind: 'NodeFeature', level: 'info', msg: 'm', pid: 42, time: t}, `${iso} INFO  m kind=NodeFeature`],
    ['undefined fields dropped', {a: undefined, b: 1, c: undefined, level: 'info', msg: 'm', time: t}, `${iso} INFO  m b=1`],
    ['message with spaces is not quoted', {level: 'info', msg: 'collected objects of deleted nodes', time: t}, `${iso} INFO  collected objects of deleted nodes`],
  ]
  for (const [title, record, line] of cases) {
    it(title, () => {
      expect(formatTextLine(record)).to.equal(line)
    })
  }

  it('does not modify the record', () => {
    const record = {hostname: 'box', level: 'info', msg: 'm', pid: 1, time: t}
    formatTextLine(record)
    expect(record).to.deep.equal({hostname: 'box', level: 'info', msg: 'm', pid: 1, time: t})
  })
})

describe('createLogger', () => {
  it('knows the four levels', () => {
    expect(logLevels).to.deep.equal(['debug', 'info', 'warn', 'error'])
  })

  it('text at level info: drops debug, writes info, warn and error as text lines', () => {
    const out = sink()
    const logger = createLogger({format: 'text', level: 'info', out})
    const before = Date.now()
    logger.debug({secret: 1}, 'too chatty')
    logger.info({}, 'started')
    logger.warn({err: 'connection refused', kind: 'NodeFeature', pending: 2}, 'watch lost')
    logger.error({code: 500}, 'sweep failed')
    const after = Date.now()

    const written = out.lines()
    expect(written).to.have.length(3)
    expect(written.join('\n')).to.not.include('too chatty')
    for (const line of written) {
      const time = Date.parse(line.split(' ')[0])
      expect(time).to.be.within(before, after)
    }
    const rest = written.map((l) => l.slice(l.indexOf(' ') + 1))
    expect(rest).to.deep.equal(['INFO  started', 'WARN  watch lost err="connection refused" kind=NodeFeature pending=2', 'ERROR sweep failed code=500'])
  })

  describe('level filtering', () => {
    const cases: Array<[level: (typeof logLevels)[number], written: string[]]> = [
      ['debug', ['DEBUG', 'INFO ', 'WARN ', 'ERROR']],
      ['info', ['INFO ', 'WARN ', 'ERROR']],
      ['warn', ['WARN ', 'ERROR']],
      ['error', ['ERROR']],
    ]
    for (const [level, written] of cases) {
      it(`at ${level}: ${written.map((w) => w.trim()).join(', ')}`, () => {
        const out = sink()
        const logger = createLogger({format: 'text', level, out})
        logger.debug({}, 'd')
        logger.info({}, 'i')
        logger.warn({}, 'w')
        logger.error({}, 'e')
        expect(out.lines().map((l) => l.slice(25, 30))).to.deep.equal(written)
      })
    }
  })

  it('text: no pid or hostname by default, base and child bindings become fields', () => {
    const out = sink()
    const logger = createLogger({base: {app: 'nfdctl'}, format: 'text', level: 'info', out})
    logger.child({component: 'collector'}).info({deleted: 1}, 'sweep done')
    const [line] = out.lines()
    expect(line).to.match(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z INFO {2}sweep done /)
    expect(line.replace(/^.* sweep done /, '').split(' ')).to.have.members(['app=nfdctl', 'component=collector', 'deleted=1'])
    expect(line).to.not.match(/pid=|hostname=/)
  })

  it('json to a given stream: one JSON object per line with the level label', () => {
    const out = sink()
    const logger = createLogger({format: 'json', level: 'info', out})
    logger.debug({}, 'hidden')
    logger.warn({kind: 'NodeFeature'}, 'watch lost')
    const written = out.lines()
    expect(written).to.have.length(1)
    const record = JSON.parse(written[0]) as Record<string, unknown>
    expect(record).to.include({kind: 'NodeFeature', level: 'warn', msg: 'watch lost'})
    expect(record.time).to.be.a('number')
    expect(record).to.not.have.property('pid')
  })
})
