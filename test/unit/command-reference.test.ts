import {copyFile, mkdtemp, readdir, readFile, rm} from 'node:fs/promises'
import {createRequire} from 'node:module'
import {tmpdir} from 'node:os'
import {join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'

import {Config} from '@oclif/core/config'
import {captureOutput} from '@oclif/test'
import {expect} from 'chai'

// docs/commands.md is what `npm run docs:commands` (oclif readme) makes of the commands' flags. This runs the
// same generator in-process, on the TypeScript sources, into a copy of the file, and compares: a flag changed
// without the doc regenerated fails here. In-process because a second CLI process (oclif, tsx, every command
// loaded again) takes seconds; the generator and its options are the ones the script's command line gives.
const root = fileURLToPath(new URL('../..', import.meta.url))
const script = (JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {scripts: Record<string, string>}).scripts['docs:commands']

interface ReadmeGeneratorOptions {
  aliases: boolean
  dryRun: boolean
  multi: boolean
  outputDir: string
  pluginDir: string
  readmePath: string
  sourceLinks: boolean
}
type ReadmeGenerator = new (config: Config, options: ReadmeGeneratorOptions) => {generate(): Promise<string>}

/** What the script's command line sets: the environment before `oclif`, the readme path, the source links. */
function scriptSettings(line: string): {columns: string; readmePath: string; sourceLinks: boolean} {
  const columns = /\bCOLUMNS=(\d+)/.exec(line)?.[1]
  const readmePath = /--readme-path[= ](\S+)/.exec(line)?.[1]
  if (columns === undefined || readmePath === undefined || !/\bNODE_ENV=development\b/.test(line)) {
    throw new Error(`the docs:commands script must set NODE_ENV=development, COLUMNS and --readme-path; it is: ${line}`)
  }
  return {columns, readmePath, sourceLinks: !line.includes('--no-source-links')}
}

/**
 * oclif's generator, loaded with the script's width: the module reads COLUMNS once, when it loads. It is
 * oclif's own file, not a public entry, so a release that moves it fails here rather than passing unchecked.
 */
function loadGenerator(columns: string): ReadmeGenerator {
  const before = process.env.COLUMNS
  process.env.COLUMNS = columns
  try {
    return (createRequire(import.meta.url)('oclif/lib/readme-generator.js') as {default: ReadmeGenerator}).default
  } finally {
    if (before === undefined) delete process.env.COLUMNS
    else process.env.COLUMNS = before
  }
}

/** The configuration the script's `oclif readme` loads: the commands from src/ (NODE_ENV=development). */
async function loadConfig(): Promise<Config> {
  const before = process.env.NODE_ENV
  process.env.NODE_ENV = 'development'
  try {
    return await Config.load({devPlugins: false, root, userPlugins: false})
  } finally {
    if (before === undefined) delete process.env.NODE_ENV
    else process.env.NODE_ENV = before
  }
}

/** Pure: the lines only `generated` has and the lines only `committed` has, which a whole-file diff would bury. */
function changedLines(committed: string, generated: string): {added: string[]; removed: string[]} {
  const before = new Set(committed.split('\n'))
  const after = new Set(generated.split('\n'))
  return {added: [...after].filter((line) => !before.has(line)), removed: [...before].filter((line) => !after.has(line))}
}

/** The ids of the command files under src/commands (`gc:once`, `version`). */
async function commandIds(): Promise<string[]> {
  const commands = join(root, 'src/commands')
  const entries = await readdir(commands, {recursive: true, withFileTypes: true})
  const files = entries.filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
  return files.map((entry) => relative(commands, join(entry.parentPath, entry.name)).replace(/\.ts$/, '').replaceAll('/', ':')).sort()
}

describe('docs/commands.md: the command reference oclif generates', function () {
  const settings = scriptSettings(script ?? '')
  let dir: string
  let committed: string
  let generated: string

  before(async function () {
    dir = await mkdtemp(join(tmpdir(), 'nfdctl-command-reference-'))
    const copy = join(dir, 'commands.md')
    await copyFile(join(root, settings.readmePath), copy)
    committed = await readFile(copy, 'utf8')
    const Generator = loadGenerator(settings.columns)
    const config = await loadConfig()
    const options = {aliases: true, dryRun: false, multi: false, outputDir: dir, pluginDir: root, readmePath: copy, sourceLinks: settings.sourceLinks}
    // The generator says on stdout which marker it replaced; that line is not the test's output.
    const {error} = await captureOutput(() => new Generator(config, options).generate())
    if (error !== undefined) throw error
    generated = await readFile(copy, 'utf8')
  })

  after(async function () {
    await rm(dir, {force: true, recursive: true})
  })

  it('is what `npm run docs:commands` generates from the commands as they are', function () {
    const fix = 'a command or flag changed: run `npm run docs:commands` and commit docs/commands.md'
    expect(changedLines(committed, generated), fix).to.deep.equal({added: [], removed: []})
    expect(generated === committed, `${fix} (the same lines in another order)`).to.equal(true)
  })

  it('names the lines a changed flag adds and removes', function () {
    const before = '## `nfdctl gc once`\n  --concurrency=<value>  [default: 64] most requests in flight\n'
    expect(changedLines(before, before.replace('64', '32'))).to.deep.equal({
      added: ['  --concurrency=<value>  [default: 32] most requests in flight'],
      removed: ['  --concurrency=<value>  [default: 64] most requests in flight'],
    })
  })

  it('has a section for every command file under src/commands', async function () {
    const missing = (await commandIds()).filter((id) => !generated.includes(`## \`nfdctl ${id.replaceAll(':', ' ')}`))
    expect(missing, 'oclif did not load these commands from src/').to.deep.equal([])
  })
})
