// Entry point of the chat window: mounts the Svelte app into index.html.
import { mount } from 'svelte';
import App from './App.svelte';
import './app.css';

const target = document.getElementById('app');
if (!target) {
  throw new Error('index.html has no #app element to mount the chat window in');
}

export default mount(App, { target });
