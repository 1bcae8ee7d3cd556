// The values table of docs/helm.md, from the `# --` comments of charts/nfdctl/values.yaml (helm-docs' comment
// style): `npx tsx scripts/helm-values-table.ts --write` rewrites the table between its markers in docs/helm.md;
// without --write it prints the table. test/unit/helm-values-table.test.ts fails while the two differ.
import {readFile, writeFile} from 'node:fs/promises'
import {fileURLToPath} from 'node:url'

import {isMap, isScalar, parseDocument, type YAMLMap} from 'yaml'

export const valuesFile = fileURLToPath(new URL('../charts/nfdctl/values.yaml', import.meta.url))
export const helmDoc = fileURLToPath(new URL('../docs/helm.md', import.meta.url))
export const tableStart = '<!-- values table: npx tsx scripts/helm-values-table.ts --write -->'
export const tableEnd = '<!-- end of values table -->'

export interface ValueRow {
  readonly path: string
  readonly defaultValue: string
  readonly description: string
}

/**
 * Every value with a `# --` comment, in file order. A key with one is a row (its whole subtree is its
 * default); a key without one is descended into. A scalar or list left without a description is an error,
 * so every value a user can set is in the table.
 */
export function valueRows(text: string): ValueRow[] {
  const doc = parseDocument(text)
  const rows: ValueRow[] = []
  const undocumented: string[] = []
  const walk = (map: YAMLMap, path: readonly string[]): void => {
    map.items.forEach((pair, index) => {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key)
      const keyPath = [...path, key]
      // yaml attaches the comment above a map's first key to the map itself, and one below a block list to
      // the list (as its trailing comment).
      const previous = index > 0 ? (map.items[index - 1].value as {comment?: string | null} | null) : undefined
      const comment = (isScalar(pair.key) ? pair.key.commentBefore : undefined) ?? (index === 0 ? map.commentBefore : previous?.comment) ?? ''
      const lines = comment.split('\n')
      const start = lines.findIndex((line) => line.startsWith(' -- '))
      if (start >= 0) {
        const description = lines
          .slice(start)
          .map((line) => line.replace(/^ (-- )?/, ''))
          .join(' ')
        rows.push({defaultValue: JSON.stringify(pair.value === null ? null : (pair.value as {toJSON(): unknown}).toJSON()), description, path: keyPath.join('.')})
      } else if (isMap(pair.value) && pair.value.items.length > 0) {
        walk(pair.value, keyPath)
      } else {
        undocumented.push(keyPath.join('.'))
      }
    })
  }
  if (!isMap(doc.contents)) throw new Error('values.yaml is not a map')
  walk(doc.contents, [])
  if (undocumented.length > 0) throw new Error(`values.yaml: no "# --" description for ${undocumented.join(', ')}`)
  return rows
}

const cell = (text: string): string => text.replaceAll('|', '\\|')

export function valuesTable(rows: readonly ValueRow[]): string {
  return ['| Value | Default | Description |', '| --- | --- | --- |', ...rows.map((row) => `| \`${cell(row.path)}\` | \`${cell(row.defaultValue)}\` | ${cell(row.description)} |`)].join('\n')
}

/** docs/helm.md with the table between its markers replaced by `table`. */
export function withTable(doc: string, table: string): string {
  const start = doc.indexOf(tableStart)
  const end = doc.indexOf(tableEnd)
  if (start < 0 || end < start) throw new Error(`docs/helm.md has no "${tableStart}" … "${tableEnd}" markers`)
  return `${doc.slice(0, start + tableStart.length)}\n${table}\n${doc.slice(end)}`
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const table = valuesTable(valueRows(await readFile(valuesFile, 'utf8')))
  if (process.argv.includes('--write')) {
    await writeFile(helmDoc, withTable(await readFile(helmDoc, 'utf8'), table))
    process.stdout.write('wrote the values table of docs/helm.md\n')
  } else {
    process.stdout.write(`${table}\n`)
  }
}
