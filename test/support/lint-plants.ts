import {execFile} from 'node:child_process'
import {copyFile, mkdir, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

// Planted files linted with the repository's own biome.jsonc in a scratch directory: how the import rules
// (the floors of src/lib, the harness and the tests) are shown to fail on a violation.
const repo = fileURLToPath(new URL('../..', import.meta.url))
const biome = join(repo, 'node_modules', '.bin', 'biome')

/** A module planted at `path` (relative to the repository) with its lines. */
export interface Plant {
  readonly path: string
  readonly lines: readonly string[]
  /** The 1-based lines biome must refuse; the other import lines must pass. */
  readonly refused: readonly number[]
}

/** A diagnostic of biome's JSON report. */
interface Diagnostic {
  category: string
  location: {path: string; start: {line: number}}
}

/** Runs biome lint over the plants in a copy of the configuration; the lines it refuses, per file. */
export async function refusedLines(plants: readonly Plant[]): Promise<Map<string, number[]>> {
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
