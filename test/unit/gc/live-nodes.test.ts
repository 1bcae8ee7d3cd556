import {expect} from 'chai'

import {NamesByPage} from '../../../src/lib/gc/live-nodes.js'

const page = (...names: string[]): Array<{name: string}> => names.map((name) => ({name}))

describe('NamesByPage (a node list answering names as its pages come)', () => {
  it('answers every name up to a page’s last one: there, or absent; the rest once the list is done', () => {
    const pages = new NamesByPage(['b', 'd', 'x', 'c2', 'zz'])
    expect(pages.page(page('a', 'b', 'c'), false)).to.deep.equal([['b', true]])
    expect(pages.page(page('c1', 'c2', 'd'), false)).to.deep.equal([
      ['c2', true],
      ['d', true],
    ])
    expect(pages.page(page('e', 'f'), false)).to.deep.equal([])
    expect(pages.rest()).to.deep.equal([
      ['x', false],
      ['zz', false],
    ])
  })

  it('answers a name absent from a page that went past it as gone', () => {
    const pages = new NamesByPage(['gone-1', 'node-9x'])
    expect(pages.page(page('node-0', 'node-1'), false)).to.deep.equal([['gone-1', false]])
    expect(pages.rest()).to.deep.equal([['node-9x', false]])
  })

  it('keeps what a restarted list’s earlier snapshot answered, and answers the rest from the new one only', () => {
    const pages = new NamesByPage(['a', 'm', 'p'])
    expect(pages.page(page('a', 'k', 'm'), false)).to.deep.equal([
      ['a', true],
      ['m', true],
    ])
    // The continue token expired; the new snapshot no longer has m, and p registered meanwhile.
    expect(pages.page(page('a', 'k'), true)).to.deep.equal([])
    expect(pages.page(page('p', 'q'), false)).to.deep.equal([['p', true]])
    expect(pages.rest()).to.deep.equal([])
  })

  it('answers nothing more before the end once a page breaks name order, then from the whole list', () => {
    const pages = new NamesByPage(['b', 'e', 'n'])
    expect(pages.page(page('a', 'c'), false)).to.deep.equal([['b', false]])
    // e must not be answered "gone" from the m seen below: the order it relied on is broken.
    expect(pages.page(page('m', 'd'), false)).to.deep.equal([])
    expect(pages.page(page('e', 'z'), false)).to.deep.equal([])
    expect(pages.rest()).to.deep.equal([
      ['e', true],
      ['n', false],
    ])
  })

  it('answers each name once, however often it is asked', () => {
    const pages = new NamesByPage(['a', 'a', 'b'])
    expect(pages.page(page('a', 'b'), false)).to.deep.equal([
      ['a', true],
      ['b', true],
    ])
    expect(pages.rest()).to.deep.equal([])
  })
})
