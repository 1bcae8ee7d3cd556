import * as Flags from '@oclif/core/flags'

import {NfdctlCommand} from '../cli/nfdctl-command.js'
import {renderVersion} from '../cli/render-version.js'
import {runningVersionInfo, type VersionInfo} from '../lib/version-info.js'

export default class Version extends NfdctlCommand {
  static override description = `Show nfdctl's version, the commit it was built from, the Node.js running it and the platform.

The commit is recorded when the package is packed (npm pack, the container image); the sources run from a checkout say so instead.`
  static override enableJsonFlag = true
  static override examples = ['<%= config.bin %> <%= command.id %>', '<%= config.bin %> <%= command.id %> -o json']
  static override flags = {
    output: Flags.option({char: 'o', default: 'text', description: 'output format', options: ['text', 'json', 'yaml'] as const})(),
  }

  async run(): Promise<VersionInfo> {
    const {flags} = await this.parse(Version)
    const info = await runningVersionInfo(this.config.version)
    if (!this.jsonEnabled()) this.log(renderVersion(info, flags.output as 'json' | 'text' | 'yaml'))
    return info
  }
}
