import {readFile} from 'node:fs/promises'

import {expect} from 'chai'

import {helmDoc, tableEnd, tableStart, valueRows, valuesFile, valuesTable} from '../../scripts/helm-values-table.js'

describe('docs/helm.md values table (scripts/helm-values-table.ts)', function () {
  it("is the table charts/nfdctl/values.yaml's comments give", async function () {
    const doc = await readFile(helmDoc, 'utf8')
    const inDoc = doc.slice(doc.indexOf(tableStart) + tableStart.length, doc.indexOf(tableEnd)).trim()
    const generated = valuesTable(valueRows(await readFile(valuesFile, 'utf8')))
    expect(inDoc, 'run: npx tsx scripts/helm-values-table.ts --write').to.equal(generated)
  })

  it('every component has the values operators expect of it', async function () {
    const paths = new Set(valueRows(await readFile(valuesFile, 'utf8')).map((row) => row.path))
    const perComponent = [
      'enable',
      'extraArgs',
      'extraEnvs',
      'resources',
      'nodeSelector',
      'tolerations',
      'affinity',
      'priorityClassName',
      'podSecurityContext',
      'securityContext',
      'annotations',
      'podAnnotations',
      'serviceAccount.create',
      'serviceAccount.name',
      'serviceAccount.annotations',
      'rbac.create',
    ]
    const missing = ['gc', 'agent', 'plugins'].flatMap((component) => perComponent.map((value) => `${component}.${value}`)).filter((path) => !paths.has(path))
    expect(missing).to.deep.equal([])
  })

  const cases: Array<[string, string, Array<[string, string, string]>]> = [
    ['a documented key is one row, its subtree its default', '# -- The image.\nimage: {repository: r, tag: t}\n', [['image', '{"repository":"r","tag":"t"}', 'The image.']]],
    [
      'an undocumented map is descended into',
      'image:\n  # -- Where.\n  repository: r\n  # -- Which.\n  tag: ""\n',
      [
        ['image.repository', '"r"', 'Where.'],
        ['image.tag', '""', 'Which.'],
      ],
    ],
    ['a description spans lines; comment lines above it are left out', '# Section.\n# -- One\n# two.\nx: 1\n', [['x', '1', 'One two.']]],
    [
      'a description below a block list belongs to the next key',
      'a:\n  # -- List.\n  t:\n  - {k: v}\n  # -- Map.\n  m: {}\n',
      [
        ['a.t', '[{"k":"v"}]', 'List.'],
        ['a.m', '{}', 'Map.'],
      ],
    ],
  ]
  for (const [what, yaml, rows] of cases) {
    it(what, function () {
      expect(valueRows(yaml).map((r) => [r.path, r.defaultValue, r.description])).to.deep.equal(rows)
    })
  }

  it('names every value without a description', function () {
    expect(() => valueRows('a:\n  b: 1\n  # -- C.\n  c: 2\nd: {}\n')).to.throw('values.yaml: no "# --" description for a.b, d')
  })
})
