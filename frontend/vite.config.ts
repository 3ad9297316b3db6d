import { defineConfig } from 'vitest/config';
import { svelte } from '@sveltejs/vite-plugin-svelte';

export default defineConfig(({ mode }) => ({
  plugins: [svelte()],
  // Wails serves dist/ from an embedded file system at the root.
  base: './',
  // Each build empties dist/; package.json's build script puts back the
  // committed dist/.gitkeep that lets a fresh clone's //go:embed compile.
  build: { outDir: 'dist', emptyOutDir: true },
  // Component tests (vitest runs in mode 'test') mount Svelte's client
  // build, not its server build.
  resolve: mode === 'test' ? { conditions: ['browser'] } : undefined,
  test: {
    environment: 'jsdom',
    include: ['src/**/*.test.ts'],
    // A file's first test also waits for jsdom and the components' first
    // render: on a busy two-core machine that alone took 8.9 s (vitest's
    // default limit is 5 s), so the limit allows for it.
    testTimeout: 20_000,
  },
}));
