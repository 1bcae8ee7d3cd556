import {readFileSync} from 'node:fs'
import {arch, platform} from 'node:os'

import ansis from 'ansis'
import stringWidth from 'string-width'
import supportsColor from 'supports-color'
import wrapAnsi from 'wrap-ansi'
import isWsl from 'is-wsl'

// The root help laid out without oclif (before-oclif.ts). What oclif would print is taken from oclif itself
// when the package is packed (root-help-content.ts writes dist/root-help.json); only what depends on the
// terminal and the Node that runs is laid out here, with oclif's own layout rules and the libraries it uses
// for them, so the text is the same byte for byte (test/unit/cli/root-help.test.ts compares the two at
// several widths).

/** One row of a TOPICS or COMMANDS list: the name and its one-line summary. */
export type HelpRow = [name: string, summary: string | undefined]

/** The root help's text, as oclif renders it before laying it out. */
export interface RootHelpContent {
  bin: string
  /** The description's first line. */
  summary: string
  /** The description's other lines, if any. */
  description: string
  topics: HelpRow[]
  commands: HelpRow[]
}

export interface RootHelpLayout {
  /** `<name>/<version> <platform>-<arch> node-<version>`, oclif's user agent. */
  userAgent: string
  /** Columns to wrap at. */
  width: number
  bold: (text: string) => string
}

/** The root help as oclif's Help class writes it, lines and blank lines included. */
export function renderRootHelp(content: RootHelpContent, layout: RootHelpLayout): string {
  const wrap = (body: string, spacing = 2): string => wrapAnsi(body, layout.width - spacing, {hard: true})
  const section = (header: string, body: string): string => `${layout.bold(header)}\n${indent(body, 2)}`
  const root = [
    content.summary,
    section('VERSION', wrap(layout.userAgent)),
    section('USAGE', wrap(`$ ${content.bin} [COMMAND]`)),
    content.description ? section('DESCRIPTION', wrap(content.description)) : '',
  ]
    .filter((part) => part)
    .join('\n\n')
  const lines = [root, '']
  if (content.topics.length > 0) lines.push(section('TOPICS', renderList(content.topics, wrap)), '')
  if (content.commands.length > 0) lines.push(section('COMMANDS', renderList(content.commands, wrap)), '')
  return lines.map((line) => `${line}\n`).join('')
}

/** oclif's HelpFormatter.renderList with its root help's options (indentation 2, one row a line). */
function renderList(rows: HelpRow[], wrap: (body: string, spacing: number) => string): string {
  const widest = Math.max(...rows.map(([name]) => stringWidth(name)))
  const lines: string[] = []
  for (const [name, summary] of rows) {
    if (!summary) {
      lines.push(name.trim())
      continue
    }
    const [first, ...rest] = wrap(summary.trim(), 2 + widest + 2)
      .split('\n')
      .map((line) => line.trim())
    if (rest.length > 4) return renderOneUnderTheOther(rows, wrap)
    lines.push(`${name}${' '.repeat(widest - stringWidth(name) + 2)}${first}${rest.length > 0 ? `\n${indent(rest.join('\n'), widest + 2)}` : ''}`)
  }
  return lines.join('\n').trim()
}

/** oclif's layout for a list with a summary over five lines: each summary under its name. */
function renderOneUnderTheOther(rows: HelpRow[], wrap: (body: string, spacing: number) => string): string {
  let output = ''
  for (const [name, summary] of rows) {
    if (!name && !summary) continue
    if (name) output += wrap(name.trim(), 2)
    if (summary) output += `\n${indent(wrap(summary.trim(), 4), 4)}`
    output += '\n\n'
  }
  return output.trim()
}

/** indent-string's rule, which oclif uses: every line that is not blank. */
function indent(text: string, count: number): string {
  return text.replace(/^(?!\s*$)/gm, ' '.repeat(count))
}

/** oclif's terminal width: OCLIF_COLUMNS, else stdout's columns (at least 40), else 80 off a terminal. */
export function helpWidth(env: NodeJS.ProcessEnv, stdout: NodeJS.WriteStream): number {
  const columns = Number.parseInt(env.OCLIF_COLUMNS ?? '', 10)
  if (columns) return columns
  if (!stdout.isTTY) return 80
  const width = stdout.getWindowSize()[0]
  return width < 1 ? 80 : Math.max(width, 40)
}

/** oclif's user agent for the package at `packageJson`. */
export function userAgent(packageJson: {name: string; version: string}): string {
  const system = isWsl ? 'wsl' : platform()
  const cpu = arch() === 'ia32' ? 'x86' : arch()
  return `${packageJson.name}/${packageJson.version} ${system}-${cpu} node-${process.version}`
}

/** Writes the root help of the package whose root is `root` (a file URL ending in a slash). */
export function printRootHelp(root: URL): void {
  const content = JSON.parse(readFileSync(new URL('dist/root-help.json', root), 'utf8')) as RootHelpContent
  const packageJson = JSON.parse(readFileSync(new URL('package.json', root), 'utf8')) as {name: string; version: string}
  // oclif makes headers bold only where supports-color finds colour on both stdout and stderr, and then through
  // ansis, which has its own detection.
  const bold = supportsColor.stdout && supportsColor.stderr ? (text: string) => ansis.bold(text) : (text: string) => text
  process.stdout.write(renderRootHelp(content, {bold, userAgent: userAgent(packageJson), width: helpWidth(process.env, process.stdout)}))
}
