import type {Config} from '@oclif/core/config'
import {Help} from '@oclif/core/help'
import type {Interfaces} from '@oclif/core'
import type {Command} from '@oclif/core/command'
import ansis from 'ansis'

import type {HelpRow, RootHelpContent} from './root-help.js'

/**
 * What oclif's root help shows for `config`, taken from oclif's own Help while it renders it: the topics and
 * commands it lists (its filters, order and summaries) and the description. Run when the package is packed
 * (scripts/root-help.mjs); root-help.ts lays it out at run time.
 */
export async function rootHelpContent(config: Config): Promise<RootHelpContent> {
  if (config.pjson.oclif.state) throw new Error(`root help: oclif's "state" (${config.pjson.oclif.state}) adds a line root-help.ts does not print`)
  const lists: Record<'commands' | 'topics', HelpRow[]> = {commands: [], topics: []}
  let listing: keyof typeof lists | undefined
  class ContentOfRootHelp extends Help {
    override renderList(input: (string | undefined)[][], opts: Parameters<Help['renderList']>[1]): string {
      if (listing !== undefined) lists[listing] = input.map(([name, summary]) => [ansis.strip(name ?? ''), summary === undefined ? undefined : ansis.strip(summary)])
      return super.renderList(input, opts)
    }

    protected override formatTopics(topics: Interfaces.Topic[]): string {
      listing = 'topics'
      const text = super.formatTopics(topics)
      listing = undefined
      return text
    }

    protected override formatCommands(commands: Command.Loadable[]): string {
      listing = 'commands'
      const text = super.formatCommands(commands)
      listing = undefined
      return text
    }

    protected override log(): void {}

    async root(): Promise<string> {
      await this.showRootHelp()
      return this.render(config.pjson.oclif.description || config.pjson.description || '')
    }
  }
  const description = (await new ContentOfRootHelp(config).root()).split('\n')
  return {bin: config.bin, commands: lists.commands, description: description.slice(1).join('\n'), summary: description[0] ?? '', topics: lists.topics}
}
