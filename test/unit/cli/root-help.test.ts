import {readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'

import {Config} from '@oclif/core/config'
import {Help, HelpFormatter} from '@oclif/core/help'
import {expect} from 'chai'

import {helpWidth, renderRootHelp, userAgent, type RootHelpContent} from '../../../src/cli/root-help.js'
import {rootHelpContent} from '../../../src/cli/root-help-content.js'

const root = fileURLToPath(new URL('../../..', import.meta.url))

/** oclif's root help at `width` columns, as `nfdctl --help` prints it through oclif. */
async function oclifRootHelp(config: Config, width: number): Promise<string> {
  let text = ''
  class Captured extends Help {
    protected override log(...args: string[]): void {
      text += `${args.join(' ')}\n`
    }
  }
  await new Captured(config, {maxWidth: width}).showHelp([])
  return text
}

describe('root help printed without oclif', function () {
  this.timeout(30_000)
  let config: Config
  let content: RootHelpContent

  before(async () => {
    // The commands from src/, as a development tree loads them; the package's help plugins from node_modules.
    const before = process.env.NODE_ENV
    process.env.NODE_ENV = 'development'
    try {
      config = await Config.load({devPlugins: false, root, userPlugins: false})
    } finally {
      if (before === undefined) delete process.env.NODE_ENV
      else process.env.NODE_ENV = before
    }
    content = await rootHelpContent(config)
  })

  it('lists what oclif lists: the topics, the root commands of nfdctl and its plugins, the summary', () => {
    expect(content.topics.map(([name]) => name)).to.deep.equal(['devices', 'gc', 'plugins'])
    expect(content.commands.map(([name]) => name)).to.deep.equal(['autocomplete', 'doctor', 'help', 'version'])
    expect(content.summary).to.equal(config.pjson.description)
  })

  for (const width of [40, 47, 60, 80, 97, 120, 200]) {
    it(`is oclif's text byte for byte at ${width} columns`, async () => {
      const ours = renderRootHelp(content, {bold: (text) => text, userAgent: config.userAgent, width})
      expect(ours).to.equal(await oclifRootHelp(config, width))
    })
  }

  it('lays a list out one row under the other where oclif does (a summary over five lines)', () => {
    const commands: RootHelpContent['commands'] = [
      ['short', 'One line.'],
      ['verbose', 'A summary long enough to wrap to more than five lines at forty columns, which makes oclif lay out the whole list one row under the other, each summary below its name.'],
      ['bare', undefined],
    ]
    const ours = renderRootHelp({...content, commands}, {bold: (text) => text, userAgent: config.userAgent, width: 40})
    const formatter = new HelpFormatter(config, {maxWidth: 40})
    const theirs = formatter.section('COMMANDS', formatter.renderList(commands, {indentation: 2, spacer: '\n'}))
    expect(ours.slice(ours.indexOf('COMMANDS\n'))).to.equal(`${theirs}\n\n`)
    expect(theirs).to.match(/^ {2}short\n {6}One line\.$/m)
  })

  it('makes the section headers bold through the function it is given', () => {
    const text = renderRootHelp(content, {bold: (header) => `<b>${header}</b>`, userAgent: 'nfdctl/1.2.3 linux-x64 node-v26.0.0', width: 80})
    expect(text.split('\n').filter((line) => line.startsWith('<b>'))).to.deep.equal(['<b>VERSION</b>', '<b>USAGE</b>', '<b>TOPICS</b>', '<b>COMMANDS</b>'])
    expect(text).to.include('\n  nfdctl/1.2.3 linux-x64 node-v26.0.0\n')
  })

  it("gives oclif's user agent", async () => {
    const packageJson = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {name: string; version: string}
    expect(userAgent(packageJson)).to.equal(config.userAgent)
  })

  it("takes oclif's width: OCLIF_COLUMNS first, 80 off a terminal, the terminal's columns but at least 40 on one", () => {
    const terminal = (columns: number) => ({getWindowSize: () => [columns, 24], isTTY: true}) as unknown as NodeJS.WriteStream
    expect(helpWidth({OCLIF_COLUMNS: '132'}, terminal(90))).to.equal(132)
    expect(helpWidth({}, {isTTY: false} as NodeJS.WriteStream)).to.equal(80)
    expect(helpWidth({}, terminal(90))).to.equal(90)
    expect(helpWidth({}, terminal(20))).to.equal(40)
    expect(helpWidth({}, terminal(0))).to.equal(80)
  })
})
