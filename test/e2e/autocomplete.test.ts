import {expect} from 'chai'
import {execFile} from 'node:child_process'
import {mkdtemp, readFile, rm} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {fileURLToPath} from 'node:url'
import {promisify} from 'node:util'

const devBin = fileURLToPath(new URL('../../bin/dev.js', import.meta.url))

// Shell completion is oclif's plugin; what matters here is that it knows nfdctl's own commands and flags.
// It writes its cache below the user's cache directory, so it runs in a home of its own.
describe('nfdctl autocomplete: shell completion of nfdctl commands and flags', function () {
  let home: string

  before(async function () {
    home = await mkdtemp(join(tmpdir(), 'nfdctl-autocomplete-'))
  })

  after(async function () {
    await rm(home, {force: true, recursive: true})
  })

  it('autocomplete bash prints the set-up, and the completion it sets up names every command and its flags', async function () {
    this.timeout(60_000)
    const env = {...process.env, HOME: home, XDG_CACHE_HOME: join(home, '.cache')}
    const setup = await promisify(execFile)(devBin, ['autocomplete', 'bash'], {env})
    expect(setup.stdout).to.contain('nfdctl autocomplete script bash')
    const script = await promisify(execFile)(devBin, ['autocomplete', 'script', 'bash'], {env})
    const setupFile = /NFDCTL_AC_BASH_SETUP_PATH=(\S+)/.exec(script.stdout)?.[1]
    expect(setupFile, script.stdout).to.equal(join(home, '.cache', 'nfdctl', 'autocomplete', 'bash_setup'))
    const functions = await readFile(join(home, '.cache', 'nfdctl', 'autocomplete', 'functions', 'bash', 'nfdctl.bash'), 'utf8')
    for (const command of ['gc:once', 'gc:run', 'devices:list', 'devices:agent', 'plugins:serve', 'version']) expect(functions, command).to.contain(command)
    for (const flag of ['--max-delete-ratio', '--leader-elect', '--containerd-address', '--class-file']) expect(functions, flag).to.contain(flag)
  })
})
