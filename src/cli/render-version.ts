import type {VersionInfo} from '../lib/version-info.js'
import {yaml} from '../lib/yaml.js'

export function renderVersion(info: VersionInfo, format: 'json' | 'text' | 'yaml'): string {
  if (format === 'json') return JSON.stringify(info, null, 2)
  if (format === 'yaml') return yaml().stringify(info).trimEnd()
  return [`version:  ${info.version}`, `commit:   ${info.commit}`, `node:     ${info.node}`, `platform: ${info.platform}`].join('\n')
}
