import { afterEach, describe, expect, it, vi } from 'vitest';
import { CallError, httpBackend } from './backend';

afterEach(() => vi.unstubAllGlobals());

function answer(status: number, body: unknown) {
  vi.stubGlobal(
    'fetch',
    vi.fn(async () => new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } })),
  );
}

describe('httpBackend', () => {
  it("shows the message of an error in the API server's shape, not [object Object]", async () => {
    const message = 'the request body is larger than this server\'s limit of 33554432 bytes';
    answer(413, { error: { message, type: 'invalid_request_error', param: null, code: 'request_too_large' } });
    const call = httpBackend().ui.AttachData('big.pdf', 'AAAA');
    await expect(call).rejects.toBeInstanceOf(CallError);
    await expect(call).rejects.toThrow(message);
  });

  it("shows the service's own error text", async () => {
    answer(422, { error: 'the message is empty: type a question first' });
    await expect(httpBackend().ui.Send({} as never)).rejects.toThrow('the message is empty: type a question first');
  });
});
