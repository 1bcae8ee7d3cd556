import {expect} from 'chai'

import {SeededRandom, seedFrom} from '../../../harness/seeded-random.js'

describe('SeededRandom: one seed, one sequence of choices', function () {
  it('repeats the same sequence for the same seed and another for another seed', function () {
    const draw = (seed: number): number[] => {
      const random = new SeededRandom(seed)
      return Array.from({length: 20}, () => random.int(0, 1000))
    }
    expect(draw(42)).to.deep.equal(draw(42))
    expect(draw(42)).to.not.deep.equal(draw(43))
  })

  it('stays within its bounds and reaches both ends', function () {
    const random = new SeededRandom(7)
    const seen = new Set(Array.from({length: 2000}, () => random.int(3, 6)))
    expect([...seen].sort()).to.deep.equal([3, 4, 5, 6])
    for (let i = 0; i < 1000; i++) expect(random.next()).to.be.within(0, 0.999_999_999_9)
    expect(new Set(Array.from({length: 200}, () => random.pick(['a', 'b', 'c'])))).to.have.length(3)
    expect(() => random.pick([])).to.throw(/nothing to pick/)
  })

  it('takes the seed from the environment when set, and refuses one that is not a whole number', function () {
    const name = 'NFDCTL_TEST_SEED_UNIT'
    try {
      process.env[name] = '1234'
      expect(seedFrom(name)).to.equal(1234)
      process.env[name] = 'abc'
      expect(() => seedFrom(name)).to.throw(`${name}=abc is not a seed; give a whole number such as the one a failed run printed`)
      delete process.env[name]
      expect(seedFrom(name)).to.be.a('number')
    } finally {
      delete process.env[name]
    }
  })
})
