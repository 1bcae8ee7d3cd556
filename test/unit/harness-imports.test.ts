import {execFile} from 'node:child_process'
import {copyFile, mkdir, mkdtemp, readdir, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join, relative} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

import {expect} from 'chai'

// The import rules of biome.jsonc, held by running biome on planted files: nothing under src/ imports harness/
// or test/, and harness/, bench/ and scripts/ import nothing from test/. Each folder of those trees gets a file
// of its own, because biome gives a file the options of the last override that matches it: an override added
// later for one folder that leaves the rule out shows up here as that folder's violation passing.
const repo = fileURLToPath(new URL('../..', import.meta.url))
const biome = join(repo, 'node_modules', '.bin', 'biome')

/** The folders under `top` (itself included), relative to the repository. */
async function foldersOf(top: string): Promise<string[]> {
  const entries = await readdir(join(repo, top), {recursive: true, withFileTypes: true})
  return [top, ...entries.filter((entry) => entry.isDirectory()).map((entry) => relative(repo, join(entry.parentPath, entry.name)))]
}

/** An import line of `target` (a repository path) as a file in `folder` writes it. */
function importLine(folder: string, target: string, name: string): string {
  const specifier = relative(folder, target)
  return `import {${name}} from '${specifier.startsWith('.') ? specifier : `./${specifier}`}'`
}

interface Plant {
  readonly path: string
  readonly lines: readonly string[]
  /** The 1-based lines biome must refuse; the other import lines must pass. */
  readonly refused: readonly number[]
}

/** A module with the import lines, in a folder; each imported name is used so no other rule speaks. */
function plant(folder: string, imports: ReadonlyArray<readonly [target: string, refused: boolean]>): Plant {
  const lines = imports.map(([target], i) => importLine(folder, target, `n${i}`))
  const refused = imports.flatMap(([, refuse], i) => (refuse ? [i + 1] : []))
  return {lines: [...lines, '', `export const used = [${imports.map((_, i) => `n${i}`).join(', ')}]`, ''], path: join(folder, 'planted-import.ts'), refused}
}

interface Diagnostic {
  category: string
  location: {path: string; start: {line: number}}
}

/** Runs biome lint over the plants in a copy of the configuration; the lines it refuses, per file. */
async function refusedLines(plants: readonly Plant[]): Promise<Map<string, number[]>> {
  const dir = await mkdtemp(join(tmpdir(), 'nfdctl-import-rules-'))
  try {
    await copyFile(join(repo, 'biome.jsonc'), join(dir, 'biome.jsonc'))
    for (const {path, lines} of plants) {
      await mkdir(join(dir, dirname(path)), {recursive: true})
      await writeFile(join(dir, path), lines.join('\n'))
    }
    // biome exits 1 when it reports anything; its JSON report is the result either way.
    const args = ['lint', '--vcs-enabled=false', '--reporter=json', '--max-diagnostics=none', '.']
    const stdout = await promisify(execFile)(biome, args, {cwd: dir}).then(
      (done) => done.stdout,
      (error: Error & {stdout?: string}) => error.stdout ?? '',
    )
    const report = JSON.parse(stdout) as {diagnostics: Diagnostic[]}
    const refused = new Map<string, number[]>()
    for (const {category, location} of report.diagnostics) {
      if (category === 'lint/style/noRestrictedImports') refused.set(location.path, [...(refused.get(location.path) ?? []), location.start.line])
    }
    return refused
  } finally {
    await rm(dir, {force: true, recursive: true})
  }
}

describe('import rules (biome.jsonc): the product, the harness and the tests', function () {
  it('refuses src/ → harness/ or test/, and harness/, bench/, scripts/ → test/, in every folder; lets the harness be imported from test/, bench/ and scripts/', async function () {
    this.timeout(60_000)
    const harness = 'harness/process/wait.js'
    const tests = 'test/support/thrown.js'
    const plants = [
      ...(await foldersOf('src')).map((folder) =>
        plant(folder, [
          [harness, true],
          [tests, true],
        ]),
      ),
      ...(await foldersOf('harness')).map((folder) =>
        plant(folder, [
          [tests, true],
          ['harness/controlplane/paths.js', false],
        ]),
      ),
      ...[...(await foldersOf('bench')), ...(await foldersOf('scripts'))].map((folder) =>
        plant(folder, [
          [tests, true],
          [harness, false],
        ]),
      ),
      plant('test/unit', [[harness, false]]),
    ]
    const refused = await refusedLines(plants)
    const wrong = plants.flatMap(({path, refused: expected}) => {
      const got = [...new Set(refused.get(path))].sort((a, b) => a - b) // a line two patterns refuse is reported twice
      return got.join() === expected.join() ? [] : [`${path}: refused lines [${got.join(', ')}], expected [${expected.join(', ')}]`]
    })
    expect(wrong, 'each folder holds the rule (an override of noRestrictedImports must repeat it)').to.deep.equal([])
  })
})
