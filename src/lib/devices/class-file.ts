import {readFile} from 'node:fs/promises'

import {ConfigError, errorMessage} from '../errors.js'
import {yaml} from '../yaml.js'
import type {DeviceClass} from './types.js'
import {validateDeviceClass} from './validate-device-class.js'

/** A class and where it came from, e.g. `classes.yaml: document 2 (usb-serial)`. */
export interface PlacedClass {
  readonly deviceClass: DeviceClass
  readonly where: string
}

export interface ParsedClassFile {
  readonly classes: PlacedClass[]
  /** One line each, starting with the file and document. */
  readonly problems: string[]
}

/**
 * Reads DeviceClass (devices.nfdctl.io) files: YAML or JSON, several documents each, Lists allowed.
 * Every problem in every file is collected first, so one run shows them all; then a single ConfigError
 * (exit 2) carries them on one line, separated by "; ".
 */
export async function loadClassFiles(paths: readonly string[]): Promise<DeviceClass[]> {
  const problems: string[] = []
  const classes: PlacedClass[] = []
  let cause: unknown
  for (const path of paths) {
    let text: string
    try {
      text = await readFile(path, 'utf8')
    } catch (error) {
      cause ??= error
      problems.push(`${path}: cannot read the class file: ${readProblem(error)}`)
      continue
    }
    const parsed = parseClassFile(path, text)
    problems.push(...parsed.problems)
    classes.push(...parsed.classes)
  }
  problems.push(...duplicateNames(classes))
  if (problems.length > 0) throw new ConfigError(problems.join('; '), cause === undefined ? undefined : {cause})
  return classes.map((c) => c.deviceClass)
}

/** Pure: the classes in one file's text and what is wrong with it. `file` only labels the messages. */
export function parseClassFile(file: string, text: string): ParsedClassFile {
  const classes: PlacedClass[] = []
  const problems: string[] = []
  yaml()
    .parseAllDocuments(text)
    .forEach((document, index) => {
      const where = `${file}: document ${index + 1}`
      const [syntax] = document.errors
      if (syntax) {
        // The yaml error's message continues with a multi-line excerpt; keep its first line, minus the position.
        const position = syntax.linePos ? `line ${syntax.linePos[0].line}, column ${syntax.linePos[0].col}: ` : ''
        problems.push(`${where}: ${position}not valid YAML: ${syntax.message.split('\n')[0].replace(/ at line \d+, column \d+:?$/, '')}`)
        return
      }
      let value: unknown
      try {
        value = document.toJS()
      } catch (error) {
        problems.push(`${where}: not valid YAML: ${errorMessage(error)}`) // e.g. an alias to an anchor not set before it
        return
      }
      if (value === null || value === undefined) return // an empty document (a stray ---, only comments)
      for (const item of itemsOf(value, where, problems)) {
        const result = validateDeviceClass(item.value)
        const label = `${item.where}${nameLabel(item.value)}`
        if (result.ok) classes.push({deviceClass: result.deviceClass, where: label})
        else problems.push(`${label}: ${result.issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('; ')}`)
      }
    })
  return {classes, problems}
}

/** A document is one class, or a List / DeviceClassList whose items are classes. */
function itemsOf(value: unknown, where: string, problems: string[]): Array<{value: unknown; where: string}> {
  if (!isRecord(value) || (value.kind !== 'List' && value.kind !== 'DeviceClassList')) return [{value, where}]
  if (!Array.isArray(value.items)) {
    problems.push(`${where}: items: a ${value.kind} needs items, a list of DeviceClass (devices.nfdctl.io) objects`)
    return []
  }
  // API list responses may leave apiVersion and kind off their items; they are the list's.
  const inherited = value.kind === 'DeviceClassList' ? {apiVersion: value.apiVersion, kind: 'DeviceClass'} : {}
  return value.items.map((item: unknown, i) => ({
    value: isRecord(item) ? {...inherited, ...item} : item,
    where: `${where}, item ${i + 1}`,
  }))
}

function duplicateNames(classes: readonly PlacedClass[]): string[] {
  const first = new Map<string, string>()
  const problems: string[] = []
  for (const {deviceClass, where} of classes) {
    const name = deviceClass.metadata.name
    const earlier = first.get(name)
    if (earlier === undefined) first.set(name, where)
    else problems.push(`${where}: metadata.name: "${name}" is also the name of ${earlier}; give each DeviceClass (devices.nfdctl.io) its own name`)
  }
  return problems
}

function nameLabel(value: unknown): string {
  const name = isRecord(value) && isRecord(value.metadata) ? value.metadata.name : undefined
  if (typeof name !== 'string' || name.length === 0) return ''
  // Keep the message on one line whatever the name holds.
  return /^[\w.-]{1,80}$/.test(name) ? ` (${name})` : ` (${JSON.stringify(name.slice(0, 80))})`
}

function readProblem(error: unknown): string {
  const code = isRecord(error) ? error.code : undefined
  if (code === 'ENOENT') return 'no such file; check the path'
  if (code === 'EACCES') return 'permission denied'
  if (code === 'EISDIR') return 'it is a directory; name the files in it'
  return errorMessage(error)
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
