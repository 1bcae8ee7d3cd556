import {readdir, readFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {expect} from 'chai'

// The rules the docs keep are checked here, so that a new file, benchmark or document cannot land unnamed.
const repo = (path: string): string => fileURLToPath(new URL(`../../${path}`, import.meta.url))
const read = (path: string): Promise<string> => readFile(repo(path), 'utf8')

/** The .ts files under src/lib, relative to it (`backoff.ts`, `kube/informer.ts`). */
async function libFiles(): Promise<string[]> {
  const entries = await readdir(repo('src/lib'), {recursive: true, withFileTypes: true})
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => `${entry.parentPath.slice(repo('src/lib').length + 1)}/${entry.name}`.replace(/^\//, ''))
    .sort()
}

/** Whether `text` names `file` as a whole word: `metrics.ts` is not named by `dra-metrics.ts`. */
function names(text: string, file: string): boolean {
  return new RegExp(`(^|[^\\w.-])${file.replaceAll('.', '\\.')}($|[^\\w-])`, 'm').test(text)
}

/**
 * Pure: the src/lib files docs/architecture.md does not name where a reader looks for them: a file of a room
 * (`dra/claim-cdi.ts`) in that room's section (### `src/lib/dra/`), by its path inside the room; a file
 * directly in src/lib in the `src/` overview before the first room's section.
 */
function unnamedLibFiles(doc: string, files: readonly string[]): string[] {
  const sections = doc.split(/^(?=### )/m)
  const overview = doc.slice(doc.indexOf('## `src/`'), doc.indexOf('\n### '))
  return files.flatMap((file) => {
    const slash = file.indexOf('/')
    if (slash < 0) return names(overview, file) ? [] : [`${file}: not in the src/ overview`]
    const room = file.slice(0, slash)
    const section = sections.find((s) => s.startsWith(`### \`src/lib/${room}/\``))
    if (section === undefined) return [`${file}: no section ### \`src/lib/${room}/\``]
    return names(section, file.slice(slash + 1)) ? [] : [`${file}: not in the section of src/lib/${room}/`]
  })
}

/** Pure: the .ts names the src/lib sections of docs/architecture.md give that no file under src/lib has (moved or gone). */
function staleLibNames(doc: string, files: readonly string[]): string[] {
  const present = new Set(files.map((file) => file.slice(file.lastIndexOf('/') + 1)))
  const named = doc
    .split(/^(?=### )/m)
    .filter((section) => section.startsWith('### `src/lib/'))
    .flatMap((section) => [...section.matchAll(/(?<![\w.-])([\w-]+\.ts)\b/g)].map((match) => match[1]))
  return [...new Set(named)].filter((name) => !present.has(name)).sort()
}

describe('docs name what the repository holds', function () {
  it('docs/architecture.md names every .ts file under src/lib, in its room', async function () {
    const missing = unnamedLibFiles(await read('docs/architecture.md'), await libFiles())
    expect(missing, 'describe each in docs/architecture.md, one line as its neighbours are').to.deep.equal([])
  })

  it('docs/architecture.md names no file under src/lib that is not there', async function () {
    expect(staleLibNames(await read('docs/architecture.md'), await libFiles()), 'a moved or removed file: correct its line').to.deep.equal([])
  })

  it('the checks fail for a file the doc does not name, a room without a section, a name inside another, a name of no file', function () {
    const doc = '## `src/`\n\nbackoff.ts\n\n### `src/lib/gc/`\n\n`dra-metrics.ts`, `sweep.ts`\n'
    expect(unnamedLibFiles(doc, ['backoff.ts', 'gc/sweep.ts'])).to.deep.equal([])
    expect(unnamedLibFiles(doc, ['abort.ts', 'gc/metrics.ts', 'dra/dra-driver.ts', 'gc/sweep-planner.ts'])).to.deep.equal([
      'abort.ts: not in the src/ overview',
      'gc/metrics.ts: not in the section of src/lib/gc/',
      'dra/dra-driver.ts: no section ### `src/lib/dra/`',
      'gc/sweep-planner.ts: not in the section of src/lib/gc/',
    ])
    expect(staleLibNames(doc, ['backoff.ts', 'gc/sweep.ts'])).to.deep.equal(['dra-metrics.ts'])
  })

  it("docs/architecture.md's layout names every folder and file directly under harness/", async function () {
    const doc = await read('docs/architecture.md')
    const layout = doc.slice(doc.indexOf('```'), doc.indexOf('```', doc.indexOf('```') + 3))
    const entries = await readdir(repo('harness'), {withFileTypes: true})
    const named = entries.map((entry) => (entry.isDirectory() ? `${entry.name}/` : entry.name))
    expect(
      named.filter((name) => !names(layout, name)),
      'name it in the harness/ line of the layout',
    ).to.deep.equal([])
  })

  it("CONTRIBUTING.md's benchmark table has a row for every bench:* script in package.json", async function () {
    const scripts = Object.keys((JSON.parse(await read('package.json')) as {scripts: Record<string, string>}).scripts)
    const contributing = await read('CONTRIBUTING.md')
    const table = contributing.slice(contributing.indexOf('## Benchmarks'), contributing.indexOf('\n## ', contributing.indexOf('## Benchmarks') + 1))
    const missing = scripts.filter((script) => script.startsWith('bench:') && !table.includes(`| \`npm run ${script}\` |`))
    expect(missing, 'add a row: what it measures, what it needs').to.deep.equal([])
  })

  it('README.md stays a front door: at most 250 lines, the depth in docs/', async function () {
    const lines = (await read('README.md')).split('\n').length - 1
    expect(lines, 'move the detail into a document under docs/ and link it').to.be.at.most(250)
  })

  it("README.md's Documentation list links every document in docs/", async function () {
    const readme = await read('README.md')
    const index = readme.slice(readme.indexOf('## Documentation'))
    const docs = (await readdir(repo('docs'))).filter((name) => name.endsWith('.md'))
    expect(docs.filter((name) => !index.includes(`(docs/${name})`))).to.deep.equal([])
  })
})
