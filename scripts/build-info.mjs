// Writes dist/build-info.json at pack time: the commit the package was built from, for `nfdctl version`.
// NFDCTL_COMMIT names it where there is no .git (the image build packs a `git archive` export); otherwise
// git is asked, and a tree with uncommitted changes to tracked files is marked `-dirty`, as `git describe` does.
import {execFileSync} from 'node:child_process'
import {writeFileSync} from 'node:fs'

const root = new URL('..', import.meta.url).pathname

function commitOfCheckout() {
  const git = (...args) => execFileSync('git', ['-C', root, ...args], {encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore']}).trim()
  try {
    const commit = git('rev-parse', 'HEAD')
    return git('status', '--porcelain', '--untracked-files=no') === '' ? commit : `${commit}-dirty`
  } catch {
    return null
  }
}

const commit = process.env.NFDCTL_COMMIT || commitOfCheckout()
if (commit === null) {
  console.error('build-info: no NFDCTL_COMMIT and no git checkout; dist/build-info.json records no commit')
}
writeFileSync(root + 'dist/build-info.json', JSON.stringify({commit}, null, 2) + '\n')
