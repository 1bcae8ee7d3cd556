import {expect} from 'chai'

import {answerWithoutOclif} from '../../../src/cli/before-oclif.js'

const root = new URL('../../../', import.meta.url)

/** What answerWithoutOclif wrote to stdout, and whether it answered. */
async function answer(args: string[]): Promise<{answered: boolean; stdout: string}> {
  let stdout = ''
  const write = process.stdout.write
  process.stdout.write = ((chunk: string) => {
    stdout += chunk
    return true
  }) as typeof process.stdout.write
  try {
    return {answered: await answerWithoutOclif(args, root), stdout}
  } finally {
    process.stdout.write = write
  }
}

describe('what bin/run.js answers without oclif', () => {
  it('leaves every other command line to oclif, writing nothing', async () => {
    for (const args of [['gc'], ['version', '-o', 'json'], ['--version'], ['-h'], ['gc', 'once'], ['help', 'gc'], ['versions']]) {
      expect(await answer(args), args.join(' ')).to.deep.equal({answered: false, stdout: ''})
    }
  })

  it("answers a plain version with the version command's text", async () => {
    const {answered, stdout} = await answer(['version'])
    expect(answered).to.equal(true)
    // From the sources there is no dist/build-info.json: the commit says so, as `nfdctl version` does there.
    expect(stdout).to.match(/^version: {2}\d+\.\d+\.\d+\ncommit: {3}unknown \(source checkout\)\nnode: {5}v\d+\.\d+\.\d+\nplatform: linux\/(amd64|arm64)\n$/)
  })
})
