import {expect} from 'chai'

import {formatTable} from '../../../src/cli/table.js'

/** Where each column starts on a line, found from the cells the caller put there. */
function columnStarts(line: string, cells: readonly string[]): number[] {
  let from = 0
  return cells.map((cell) => {
    const at = line.indexOf(cell, from)
    from = at + cell.length
    return at
  })
}

describe('formatTable', () => {
  it('puts the header first, then one line per row', () => {
    const lines = formatTable(
      ['NAME', 'AGE'],
      [
        ['a', '1'],
        ['b', '2'],
      ],
    ).split('\n')
    expect(lines).to.have.length(3)
    expect(lines[0]).to.match(/^NAME +AGE$/)
    expect(lines[1]).to.match(/^a +1$/)
    expect(lines[2]).to.match(/^b +2$/)
  })

  it('prints only the header for no rows', () => {
    expect(formatTable(['KIND', 'SCANNED'], [])).to.match(/^KIND +SCANNED$/)
    expect(formatTable(['KIND', 'SCANNED'], [])).to.not.include('\n')
  })

  it('prints a single column without padding', () => {
    expect(formatTable(['NAME'], [['a'], ['longer']])).to.equal('NAME\na\nlonger')
  })

  it('returns an empty string for no headers and no rows', () => {
    expect(formatTable([], [])).to.equal('')
  })

  describe('column alignment', () => {
    const cases: Array<{title: string; headers: string[]; rows: string[][]}> = [
      {
        headers: ['NAME', 'AGE', 'NODE'],
        rows: [
          ['a', '1', 'x'],
          ['bbbbbbbb', '22', 'y'],
        ],
        title: 'a cell wider than its header',
      },
      {
        headers: ['KIND', 'SCANNED', 'STALE'],
        rows: [
          ['NF', '1', '0'],
          ['NRT', '10', '3'],
        ],
        title: 'headers wider than every cell',
      },
      {
        headers: ['A', 'B', 'C', 'D'],
        rows: [
          ['xxxxx', 'y', 'zzz', 'w'],
          ['x', 'yyyyyyy', 'z', 'wwwwww'],
        ],
        title: 'mixed widths over four columns',
      },
    ]
    for (const c of cases) {
      it(`starts every column at the same offset: ${c.title}`, () => {
        const lines = formatTable(c.headers, c.rows).split('\n')
        const all = [c.headers, ...c.rows]
        const starts = lines.map((line, i) => columnStarts(line, all[i]))
        for (const s of starts) expect(s).to.deep.equal(starts[0])
      })

      it(`leaves the same gap after the widest cell of each column: ${c.title}`, () => {
        const lines = formatTable(c.headers, c.rows).split('\n')
        const starts = columnStarts(lines[0], c.headers)
        const all = [c.headers, ...c.rows]
        const gaps = c.headers.slice(0, -1).map((_, i) => starts[i + 1] - starts[i] - Math.max(...all.map((r) => r[i].length)))
        expect(gaps[0]).to.be.greaterThan(0)
        for (const g of gaps) expect(g).to.equal(gaps[0])
      })
    }
  })

  it('separates columns by three spaces, as kubectl does', () => {
    expect(formatTable(['NAME', 'AGE'], [['abcd', '1']])).to.equal('NAME   AGE\nabcd   1')
  })

  describe('trailing whitespace', () => {
    it('is trimmed when the last cell is empty', () => {
      const out = formatTable(
        ['KIND', 'NOTE'],
        [
          ['NodeFeature', ''],
          ['NodeResourceTopology', 'skipped'],
        ],
      )
      const lines = out.split('\n')
      expect(lines[1]).to.equal('NodeFeature')
      for (const line of lines) expect(line).to.equal(line.trimEnd())
    })

    it('is trimmed when trailing cells are all empty', () => {
      const lines = formatTable(['A', 'B', 'C'], [['x', '', '']]).split('\n')
      expect(lines[1]).to.equal('x')
    })

    it('does not pad the last column of a line', () => {
      const lines = formatTable(
        ['NAME', 'RESULT'],
        [
          ['a', 'deleted'],
          ['b', 'kept'],
        ],
      ).split('\n')
      expect(lines[2].endsWith('kept')).to.equal(true)
    })
  })

  it('treats a missing cell of a short row as empty', () => {
    const lines = formatTable(['A', 'B', 'C'], [['x'], ['xx', 'yy', 'zz']]).split('\n')
    expect(lines[1]).to.equal('x')
    expect(columnStarts(lines[2], ['xx', 'yy', 'zz'])).to.deep.equal(columnStarts(lines[0], ['A', 'B', 'C']))
  })

  it('keeps empty cells in the middle so later columns stay aligned', () => {
    const lines = formatTable(
      ['NS', 'NAME'],
      [
        ['', 'cluster-obj'],
        ['nfd', 'nf-a'],
      ],
    ).split('\n')
    expect(lines[1].indexOf('cluster-obj')).to.equal(lines[0].indexOf('NAME'))
    expect(lines[2].indexOf('nf-a')).to.equal(lines[0].indexOf('NAME'))
  })
})
