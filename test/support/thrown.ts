import {expect} from 'chai'

import {UsageError} from '../../src/lib/errors.js'

type ErrorClass<E extends Error> = abstract new (...args: never[]) => E

/** The error `promise` rejects with, checked to be a `type`; the test fails when it resolves. */
export async function rejection<E extends Error = Error>(promise: Promise<unknown>, type?: ErrorClass<E>): Promise<E> {
  try {
    await promise
  } catch (error) {
    expect(error).to.be.instanceOf(type ?? Error)
    return error as E
  }
  expect.fail(`expected a rejection${type === undefined ? '' : ` with a ${type.name}`}, but the promise resolved`)
}

/** The error `fn` throws, checked to be a `type`; the test fails when it returns. */
export function thrownBy<E extends Error>(fn: () => unknown, type: ErrorClass<E>): E {
  try {
    fn()
  } catch (error) {
    expect(error).to.be.instanceOf(type)
    return error as E
  }
  expect.fail(`expected a ${type.name}, but nothing was thrown`)
}

/** The UsageError `fn` throws (a flag's value refused). */
export const usageErrorFrom = (fn: () => unknown): UsageError => thrownBy(fn, UsageError)
