import {expect} from 'chai'

import {deviceKeyOf, parseUevent} from '../../../src/lib/devices/uevent.js'

const datagram = (...parts: string[]): Buffer => Buffer.from(parts.join('\0') + '\0')

describe('parseUevent', () => {
  it('parses a kernel add event with its variables', () => {
    const event = parseUevent(
      datagram(
        'add@/devices/virtual/block/loop200',
        'ACTION=add',
        'DEVPATH=/devices/virtual/block/loop200',
        'SUBSYSTEM=block',
        'MAJOR=7',
        'MINOR=200',
        'DEVNAME=loop200',
        'DEVTYPE=disk',
        'SEQNUM=830',
      ),
    )
    expect(event).to.deep.equal({
      action: 'add',
      devPath: '/devices/virtual/block/loop200',
      env: {ACTION: 'add', DEVNAME: 'loop200', DEVPATH: '/devices/virtual/block/loop200', DEVTYPE: 'disk', MAJOR: '7', MINOR: '200', SEQNUM: '830', SUBSYSTEM: 'block'},
      seqnum: 830,
      subsystem: 'block',
    })
  })

  it('falls back to the header when ACTION and DEVPATH are missing', () => {
    const event = parseUevent(datagram('remove@/devices/virtual/bdi/7:200'))
    expect(event?.action).to.equal('remove')
    expect(event?.devPath).to.equal('/devices/virtual/bdi/7:200')
    expect(event?.seqnum).to.equal(undefined)
  })

  it('keeps "=" inside values and synthetic arguments', () => {
    const event = parseUevent(datagram('change@/devices/virtual/mem/null', 'ACTION=change', 'SYNTH_UUID=3f1c7e2a', 'SYNTH_ARG_KEY=a=b'))
    expect(event?.env.SYNTH_ARG_KEY).to.equal('a=b')
    expect(event?.env.SYNTH_UUID).to.equal('3f1c7e2a')
  })

  const ignored: Array<[string, Buffer]> = [
    ['udevd (libudev) messages', Buffer.concat([Buffer.from('libudev\0'), Buffer.alloc(32, 0xfe)])],
    ['a header without @', datagram('hello', 'A=B')],
    ['a header starting with @', datagram('@/devices/x')],
    ['an empty datagram', Buffer.alloc(0)],
  ]
  for (const [name, buffer] of ignored) {
    it(`ignores ${name}`, () => {
      expect(parseUevent(buffer)).to.equal(undefined)
    })
  }

  it('ignores variables without a name', () => {
    expect(parseUevent(datagram('add@/x', '=value', 'NOEQUALS', 'A=1'))?.env).to.deep.equal({A: '1'})
  })
})

describe('deviceKeyOf', () => {
  const event = (env: Record<string, string>) => parseUevent(datagram('add@/devices/x', ...Object.entries(env).map(([k, v]) => `${k}=${v}`)))!

  it('names a block device', () => {
    expect(deviceKeyOf(event({DEVNAME: 'loop3', MAJOR: '7', MINOR: '3', SUBSYSTEM: 'block'}))).to.deep.equal({devName: 'loop3', major: 7, minor: 3, type: 'block'})
  })

  it('treats every other subsystem with a node as a character device', () => {
    expect(deviceKeyOf(event({DEVNAME: 'ttyUSB0', MAJOR: '188', MINOR: '0', SUBSYSTEM: 'tty'}))?.type).to.equal('char')
  })

  it('is undefined for events without a device node (bdi, net, drivers)', () => {
    expect(deviceKeyOf(event({SUBSYSTEM: 'bdi'}))).to.equal(undefined)
    expect(deviceKeyOf(event({DEVNAME: 'x', MAJOR: '1', SUBSYSTEM: 'mem'}))).to.equal(undefined)
  })
})
