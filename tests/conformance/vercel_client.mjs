// The Vercel AI SDK as a client of one exchange, for the conformance suite.
// node vercel_client.mjs '{"baseURL": ".../v1", "api": "chat"|"responses", "mode": "generate"|"stream"|"tool"}'
// prints one JSON line: {text, finishReason, usage, toolCalls, toolResults, steps, error}.
import { generateText, streamText, tool, stepCountIs } from 'ai';
import { createOpenAI } from '@ai-sdk/openai';
import { z } from 'zod';

const spec = JSON.parse(process.argv[2]);
const provider = createOpenAI({ baseURL: spec.baseURL, apiKey: 'sk-conformance' });
const model = spec.api === 'responses' ? provider.responses('gpt-test') : provider.chat('gpt-test');
const tools = {
  get_weather: tool({
    description: 'The weather in a city.',
    inputSchema: z.object({ city: z.string() }),
    execute: async () => '18C, sunny',
  }),
};

function errorOf(error) {
  let e = error;
  while (e && e.statusCode === undefined && e.cause) e = e.cause;  // retries and stream errors wrap the API error
  if (e && e.lastError) e = e.lastError;
  const headers = (e && e.responseHeaders) || {};
  return [e && e.name ? e.name : String(error), e && e.statusCode !== undefined ? e.statusCode : null,
          headers['retry-after'] ?? null];
}

function result(text, finishReason, usage, steps) {
  return {
    text: text || null,
    finishReason,
    usage: usage && usage.totalTokens !== undefined ? usage.totalTokens : null,
    toolCalls: steps.flatMap((s) => s.toolCalls.map((c) => [c.toolName, c.input])),
    toolResults: steps.flatMap((s) => s.toolResults.map((r) => r.output)),
    steps: steps.length,
    error: null,
  };
}

async function main() {
  const ask = { model, maxRetries: 0, prompt: spec.prompt };
  if (spec.mode === 'stream') {
    let failure = null;
    const r = streamText({ ...ask, onError: ({ error }) => { failure = error; } });
    let text = '';
    try {
      for await (const piece of r.textStream) text += piece;
      const out = result(text, await r.finishReason, await r.totalUsage, await r.steps);
      if (failure) out.error = errorOf(failure);
      return out;
    } catch (error) {
      return { error: errorOf(failure || error) };
    }
  }
  try {
    const extra = spec.mode === 'tool' ? { tools, stopWhen: stepCountIs(4) } : {};
    const r = await generateText({ ...ask, ...extra });
    return result(r.text, r.finishReason, r.totalUsage, r.steps);
  } catch (error) {
    return { error: errorOf(error) };
  }
}

main().then((out) => { console.log(JSON.stringify(out)); });
