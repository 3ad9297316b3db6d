// Entry point of the chat window: mounts the Svelte app into index.html.
import { mount } from 'svelte';
import App from './App.svelte';
import './app.css';
import icon from '../../assets/icons/appicon.svg';

// The tab's icon is the app's (small enough to be inlined by the build).
const link = document.createElement('link');
link.rel = 'icon';
link.type = 'image/svg+xml';
link.href = icon;
document.head.append(link);

const target = document.getElementById('app');
if (!target) {
  throw new Error('index.html has no #app element to mount the chat window in');
}

export default mount(App, { target });
