import {readFile} from 'node:fs/promises'

import {Ajv} from 'ajv'

/** The CDI project's JSON schema (test/fixtures/cdi-schema), compiled: validates a spec file's content. */
export async function cdiValidator(): Promise<ReturnType<Ajv['compile']>> {
  const dir = new URL('../fixtures/cdi-schema/', import.meta.url)
  const ajv = new Ajv({allErrors: true, strict: false})
  ajv.addSchema(JSON.parse(await readFile(new URL('defs.json', dir), 'utf8')) as object, 'defs.json')
  return ajv.compile(JSON.parse(await readFile(new URL('schema.json', dir), 'utf8')) as object)
}
